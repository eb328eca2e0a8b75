import { type ChildProcess, execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { endProcess, freePorts } from './process.js';
import { inMemoryOnLoopback, spawnRedisServer } from './redis.js';
import { requireProgram } from './services.js';
import { until } from './until.js';

/** One master of the Cluster and the hash slots it serves (inclusive ranges). */
export interface ClusterNode {
  readonly port: number;
  readonly slots: readonly (readonly [number, number])[];
}

/**
 * A Redis Cluster of three masters (and a replica of each, if asked), on free loopback ports (Debian's redis-server and
 * redis-cli).
 */
export interface RedisClusterProcess {
  /** `redis-cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`: the gateway's REDIS_URL. */
  readonly url: string;
  readonly nodes: readonly ClusterNode[];
  /**
   * A connection to the master on `port` (not a Cluster client: it follows no MOVED), made once and closed by `stop`.
   */
  client(port: number): Redis;
  /** DBSIZE of each master, by port. */
  keysPerMaster(): Promise<Map<number, number>>;
  /** `INFO errorstats` of each master, by port: error prefix (`CROSSSLOT`, `MOVED`) to count. */
  errorStats(): Promise<Map<number, Record<string, number>>>;
  /** SIGKILL of the master on `port`: gone at once, as a crash would. */
  killMaster(port: number): Promise<void>;
  /**
   * Resolves with the port of the node that serves `slot` as a master once it is not `formerMaster` (its replica
   * promoted).
   */
  waitForPromotion(slot: number, formerMaster: number, limitMs?: number): Promise<number>;
  /** Stops every node (SIGKILL) and removes their files. */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** A replica of each master (six nodes), promoted when its master fails. @default false */
  readonly replicas?: boolean;
  /**
   * `cluster-node-timeout`: how long a node may be silent before it is failed (and its replica promoted). @default
   * Redis's 15000
   */
  readonly nodeTimeoutMs?: number;
}

const MASTERS = 3;

/** `INFO errorstats` as `{ CROSSSLOT: 2 }` (lines `errorstat_CROSSSLOT:count=2`). */
export function parseErrorStats(info: string): Record<string, number> {
  return Object.fromEntries(
    [...info.matchAll(/^errorstat_(\S+?):count=(\d+)/gm)].map(([, error, count]) => [error!, Number(count)]),
  );
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-cluster-'));
  const count = options.replicas ? 2 * MASTERS : MASTERS;
  // The bus ports are given too: the default (port + 10000) overflows for an ephemeral port.
  const ports = await freePorts(count * 2);
  const [nodePorts, busPorts] = [ports.slice(0, count), ports.slice(count)];
  const servers = new Map<number, ChildProcess>();
  const clients = new Map<number, Redis>();
  const client = (port: number) => {
    let redis = clients.get(port);
    if (redis === undefined) {
      redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
      clients.set(port, redis);
    }
    return redis;
  };

  const stop = async () => {
    for (const redis of clients.values()) redis.disconnect();
    await Promise.all([...servers.values()].map((server) => endProcess(server)));
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const started = await Promise.allSettled(
      nodePorts.map((port, i) =>
        spawnRedisServer([
          '--port',
          String(port),
          '--cluster-enabled',
          'yes',
          '--cluster-port',
          String(busPorts[i]),
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          // Their own directory, for anything a node writes.
          '--dir',
          dir,
          ...(options.nodeTimeoutMs === undefined ? [] : ['--cluster-node-timeout', String(options.nodeTimeoutMs)]),
          ...inMemoryOnLoopback,
        ]),
      ),
    );
    for (const [i, result] of started.entries())
      if (result.status === 'fulfilled') servers.set(nodePorts[i]!, result.value);
    for (const result of started) if (result.status === 'rejected') throw result.reason;

    // With replicas, redis-cli makes the first three the masters and each of the others a replica.
    await promisify(execFile)(requireProgram('redis-cli'), [
      '--cluster',
      'create',
      ...nodePorts.map((port) => `127.0.0.1:${port}`),
      '--cluster-replicas',
      options.replicas ? '1' : '0',
      '--cluster-yes',
    ]);
    const clusterOk = async () =>
      (
        await Promise.all(
          nodePorts.map(async (port) =>
            /^cluster_state:ok\r?$/m.test(String(await client(port).call('CLUSTER', 'INFO'))),
          ),
        )
      ).every(Boolean);
    await until(clusterOk, 'cluster_state:ok on every node', 20_000, 50);

    // CLUSTER SLOTS: [[first, last, [host, port, id], ...replicas], ...]
    type Ranges = [number, number, [string, number, string], ...[string, number, string][]][];
    const slotsFrom = async (port: number) => (await client(port).call('CLUSTER', 'SLOTS')) as Ranges;
    // A replica is listed once it has synced: every range with its replica, when there are some.
    await until(
      async () => !options.replicas || (await slotsFrom(nodePorts[0]!)).every((range) => range.length > 3),
      'every master with its replica',
      20_000,
      50,
    );
    const ranges = await slotsFrom(nodePorts[0]!);
    const masterPorts = [...new Set(ranges.map(([, , [, owner]]) => owner))];
    const nodes = masterPorts.map((port) => ({
      port,
      slots: ranges.filter(([, , [, owner]]) => owner === port).map(([first, last]) => [first, last] as const),
    }));
    // From here on the error counts are the test's (redis-cli's probes made some).
    await Promise.all(nodePorts.map((port) => client(port).config('RESETSTAT')));

    return {
      url: `redis-cluster://${masterPorts.map((port) => `127.0.0.1:${port}`).join(',')}`,
      nodes,
      client,
      async keysPerMaster() {
        return new Map(
          await Promise.all(masterPorts.map(async (port) => [port, await client(port).dbsize()] as const)),
        );
      },
      async errorStats() {
        return new Map(
          await Promise.all(
            masterPorts.map(async (port) => [port, parseErrorStats(await client(port).info('errorstats'))] as const),
          ),
        );
      },
      async killMaster(port) {
        client(port).disconnect();
        await endProcess(servers.get(port)!);
      },
      async waitForPromotion(slot, formerMaster, limitMs = 30_000) {
        let promoted: number | undefined;
        const alive = nodePorts.filter((port) => port !== formerMaster);
        await until(
          async () => {
            const owner = (await slotsFrom(alive[0]!)).find(([first, last]) => slot >= first && slot <= last)?.[2][1];
            promoted = owner !== undefined && owner !== formerMaster ? owner : undefined;
            return promoted !== undefined;
          },
          `a replica serving slot ${slot} as a master`,
          limitMs,
          50,
        );
        return promoted!;
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
