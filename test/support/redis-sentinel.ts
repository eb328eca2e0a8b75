import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { endProcess, freePorts } from './process.js';
import { inMemoryOnLoopback, spawnRedisServer } from './redis.js';
import { until } from './until.js';

/**
 * Redis as Sentinel runs it, on free loopback ports: a master, one replica of it, and three
 * Sentinels watching it (quorum 2) that promote the replica when the master stops answering.
 */
export interface RedisSentinelProcess {
  /** `redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/gwmaster`: the gateway's REDIS_URL. */
  readonly url: string;
  readonly masterName: string;
  /** The Sentinels' ports. */
  readonly sentinelPorts: readonly number[];
  /** The master's port as of the last failover this object saw (the first master before any). */
  readonly masterPort: number;
  /** The replica's port (the master-to-be of a failover). */
  readonly replicaPort: number;
  /** A connection to the node on `port`, made once and closed by `stop`. */
  client(port: number): Redis;
  /** SIGKILL of the master: gone at once, as a crash would. */
  killMaster(): Promise<void>;
  /**
   * Resolves with the new master's port once the Sentinels name another node and that node answers ROLE as a master.
   */
  waitForFailover(limitMs?: number): Promise<number>;
  /** Stops every process (SIGKILL) and removes their files. */
  stop(): Promise<void>;
}

const MASTER_NAME = 'gwmaster';
const SENTINELS = 3;

/**
 * A Sentinel's config: it rewrites this file as it learns the topology, so it is one of its own, in a writable place.
 */
function sentinelConf(port: number, masterPort: number, dir: string): string {
  return [
    `port ${port}`,
    'bind 127.0.0.1',
    `dir ${dir}`,
    'sentinel resolve-hostnames no',
    `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} 2`,
    // Down after a second of silence; a failover given up (and tried again) after four.
    `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
    `sentinel failover-timeout ${MASTER_NAME} 4000`,
    '',
  ].join('\n');
}

export async function startRedisSentinel(): Promise<RedisSentinelProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-sentinel-'));
  const [masterPort, replicaPort, ...sentinelPorts] = await freePorts(2 + SENTINELS);
  const processes = new Map<number, ChildProcess>();
  const clients = new Map<number, Redis>();
  const client = (port: number) => {
    let redis = clients.get(port);
    if (redis === undefined) {
      redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => 100 });
      clients.set(port, redis);
      // The master's connection fails once it is killed: this is for asking, not for watching.
      redis.on('error', () => {});
    }
    return redis;
  };
  const start = async (port: number, args: string[]) => processes.set(port, await spawnRedisServer(args));
  const stop = async () => {
    for (const redis of clients.values()) redis.disconnect();
    await Promise.all([...processes.values()].map((process) => endProcess(process)));
    rmSync(dir, { recursive: true, force: true });
  };

  let currentMaster = masterPort!;
  const sentinelsName = async (): Promise<number[]> =>
    Promise.all(
      sentinelPorts.map(async (port) =>
        Number(
          (
            (await client(port).call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as [string, string] | null
          )?.[1],
        ),
      ),
    );
  const isMaster = async (port: number) =>
    (
      (await client(port)
        .call('ROLE')
        .catch(() => undefined)) as unknown[] | undefined
    )?.[0] === 'master';

  try {
    // Their own directory: a replica writes the copy it syncs from its master to disk (dump.rdb).
    await start(masterPort!, ['--port', String(masterPort), '--dir', dir, ...inMemoryOnLoopback]);
    await start(replicaPort!, [
      '--port',
      String(replicaPort),
      '--replicaof',
      '127.0.0.1',
      String(masterPort),
      '--dir',
      dir,
      ...inMemoryOnLoopback,
    ]);
    await until(
      async () => /^master_link_status:up\r?$/m.test(await client(replicaPort!).info('replication')),
      'the replica in sync with the master',
      10_000,
      20,
    );
    for (const port of sentinelPorts) {
      const file = join(dir, `sentinel-${port}.conf`);
      writeFileSync(file, sentinelConf(port, masterPort!, dir));
      await start(port, [file, '--sentinel']);
    }
    // A failover needs each Sentinel to know the replica (from the master's INFO) and the other
    // Sentinels (from their hellos on the master, every 2 s): before that, killing the master would strand it.
    const informed = async () =>
      (
        await Promise.all(
          sentinelPorts.map(async (port) => {
            const [replicas, others] = (await Promise.all([
              client(port).call('SENTINEL', 'REPLICAS', MASTER_NAME),
              client(port).call('SENTINEL', 'SENTINELS', MASTER_NAME),
            ])) as [unknown[], unknown[]];
            return replicas.length === 1 && others.length === SENTINELS - 1;
          }),
        )
      ).every(Boolean);
    await until(informed, 'every Sentinel knowing the replica and the other Sentinels', 20_000, 100);
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    url: `redis-sentinel://${sentinelPorts.map((port) => `127.0.0.1:${port}`).join(',')}/${MASTER_NAME}`,
    masterName: MASTER_NAME,
    sentinelPorts: sentinelPorts as number[],
    get masterPort() {
      return currentMaster;
    },
    replicaPort: replicaPort!,
    client,
    async killMaster() {
      const master = processes.get(currentMaster);
      if (master !== undefined) await endProcess(master);
    },
    async waitForFailover(limitMs = 30_000) {
      const before = currentMaster;
      let named: number | undefined;
      await until(
        async () => {
          const answers = await sentinelsName();
          named = answers.find((port) => Number.isInteger(port) && port !== before);
          // A majority names the new master, and the node itself has taken the role.
          return named !== undefined && answers.filter((port) => port === named).length >= 2 && (await isMaster(named));
        },
        `the Sentinels promoting a new master of ${MASTER_NAME}`,
        limitMs,
        20,
      );
      currentMaster = named!;
      return currentMaster;
    },
    stop,
  };
}
