import { execFile, type ChildProcess } from 'node:child_process';
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

/** A Redis Cluster of three masters, no replicas, on free loopback ports (Debian's redis-server and redis-cli). */
export interface RedisClusterProcess {
  /** `redis-cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3`: the gateway's REDIS_URL. */
  readonly url: string;
  readonly nodes: readonly ClusterNode[];
  /** A connection to the master on `port` (not a Cluster client: it follows no MOVED), made once and closed by `stop`. */
  client(port: number): Redis;
  /** DBSIZE of each master, by port. */
  keysPerMaster(): Promise<Map<number, number>>;
  /** `INFO errorstats` of each master, by port: error prefix (`CROSSSLOT`, `MOVED`) to count. */
  errorStats(): Promise<Map<number, Record<string, number>>>;
  /** Stops every node (SIGKILL) and removes their files. */
  stop(): Promise<void>;
}

const MASTERS = 3;

/** `INFO errorstats` as `{ CROSSSLOT: 2 }` (lines `errorstat_CROSSSLOT:count=2`). */
export function parseErrorStats(info: string): Record<string, number> {
  return Object.fromEntries([...info.matchAll(/^errorstat_(\S+?):count=(\d+)/gm)].map(([, error, count]) => [error!, Number(count)]));
}

export async function startRedisCluster(): Promise<RedisClusterProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'redis-cluster-'));
  // The bus ports are given too: the default (port + 10000) overflows for an ephemeral port.
  const ports = await freePorts(MASTERS * 2);
  const [nodePorts, busPorts] = [ports.slice(0, MASTERS), ports.slice(MASTERS)];
  const servers: ChildProcess[] = [];
  const clients = new Map<number, Redis>();
  const client = (port: number) => {
    let redis = clients.get(port);
    if (redis === undefined) clients.set(port, (redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 })));
    return redis;
  };

  const stop = async () => {
    for (const redis of clients.values()) redis.disconnect();
    await Promise.all(servers.map((server) => endProcess(server)));
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const started = await Promise.allSettled(
      nodePorts.map((port, i) =>
        spawnRedisServer([
          '--port', String(port),
          '--cluster-enabled', 'yes',
          '--cluster-port', String(busPorts[i]),
          '--cluster-config-file', join(dir, `nodes-${port}.conf`),
          // Their own directory, for anything a node writes.
          '--dir', dir,
          ...inMemoryOnLoopback,
        ]),
      ),
    );
    for (const result of started) if (result.status === 'fulfilled') servers.push(result.value);
    for (const result of started) if (result.status === 'rejected') throw result.reason;

    await promisify(execFile)(requireProgram('redis-cli'), ['--cluster', 'create', ...nodePorts.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes']);
    const clusterOk = async () => (await Promise.all(nodePorts.map(async (port) => /^cluster_state:ok\r?$/m.test(String(await client(port).call('CLUSTER', 'INFO')))))).every(Boolean);
    await until(clusterOk, 'cluster_state:ok on every node', 20_000, 50);

    // From here on the error counts are the test's (redis-cli's probes made some).
    await Promise.all(nodePorts.map((port) => client(port).config('RESETSTAT')));
    // CLUSTER SLOTS: [[first, last, [host, port, id], ...], ...]
    const ranges = (await client(nodePorts[0]!).call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const nodes = nodePorts.map((port) => ({ port, slots: ranges.filter(([, , [, owner]]) => owner === port).map(([first, last]) => [first, last] as const) }));

    return {
      url: `redis-cluster://${nodePorts.map((port) => `127.0.0.1:${port}`).join(',')}`,
      nodes,
      client,
      async keysPerMaster() {
        return new Map(await Promise.all(nodePorts.map(async (port) => [port, await client(port).dbsize()] as const)));
      },
      async errorStats() {
        return new Map(await Promise.all(nodePorts.map(async (port) => [port, parseErrorStats(await client(port).info('errorstats'))] as const)));
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
