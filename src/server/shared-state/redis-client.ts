import { performance } from 'node:perf_hooks';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisCredentials, SharedStateSettings } from '../../config.js';

/** A Redis command that takes longer fails, and its store falls back to process memory. */
export const COMMAND_TIMEOUT_MS = 500;

/** How long one attempt to connect may take before ioredis tries again. */
const CONNECT_TIMEOUT_MS = 2_000;

/** The longest wait between two attempts to reconnect (100 ms more after each failed one until then). */
const MAX_RECONNECT_DELAY_MS = 2_000;

/** How a command is answered and how the connection comes back, for every node of every topology: never waited on. */
const commandOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: COMMAND_TIMEOUT_MS,
  connectTimeout: CONNECT_TIMEOUT_MS,
} satisfies RedisOptions;

const reconnectDelay = (attempt: number) => Math.min(100 * attempt, MAX_RECONNECT_DELAY_MS);

/**
 * A connection answered READONLY is made again at most this often (a node that stays a replica is not reconnected to at
 * every write).
 */
const READONLY_RECONNECT_EVERY_MS = 10_000;

/**
 * A master demoted by a failover that keeps its connections answers writes with READONLY: the
 * connection is dropped and made again (to the master the Sentinels name now, or where a
 * managed endpoint's name leads now), at most every 10 s. The command is not sent again (1, not
 * 2): a limiter's count would be counted twice. One clock per client (a Cluster's nodes share theirs).
 */
function reconnectWhenDemoted(): (error: Error) => 1 | false {
  let last = -Infinity;
  return (error) => {
    if (!error.message.startsWith('READONLY') || performance.now() - last < READONLY_RECONNECT_EVERY_MS) return false;
    last = performance.now();
    return 1;
  };
}

/** The clients `quitRedis` has closed: the only ones left ended. */
const quitting = new WeakSet<Redis | Cluster>();

/** Closes `client` for good (waiting for the replies it is owed, if it can), and lets it end. */
export async function quitRedis(client: Redis | Cluster): Promise<void> {
  quitting.add(client);
  await client.quit().catch(() => client.disconnect());
}

/**
 * ioredis 5 gives a connection up for good ('end') when a failover is announced while it asks the
 * Sentinels where the master is: the failover detector of the connection it lost stops the
 * lookup, which fails with "Connection is closed." (seen in one of ten failovers with three
 * gateways). Any client that ends without `quitRedis` is connected again, after the delay a
 * failed reconnection would wait.
 */
function neverGiveUp(client: Redis): Redis {
  let attempts = 0;
  client.on('ready', () => (attempts = 0));
  client.on('end', () => {
    if (!quitting.has(client))
      setTimeout(() => void client.connect().catch(() => {}), reconnectDelay(++attempts)).unref();
  });
  return client;
}

/** Redis's own user and password, and TLS (`rediss…`), as ioredis takes them. */
const nodeOptions = (credentials: RedisCredentials, tls: boolean): RedisOptions => ({
  ...(credentials.username === undefined ? {} : { username: credentials.username }),
  ...(credentials.password === undefined ? {} : { password: credentials.password }),
  ...(tls ? { tls: {} } : {}),
});

/**
 * What a client is for: `commands` (the stores': never waited on), or `events` (pub/sub: a
 * subscription asked for while the connection is down waits for it, and a Cluster's channels are
 * sharded, SSUBSCRIBE on the master of their slot).
 */
export type RedisClientPurpose = 'commands' | 'events';

/** The ioredis client of a topology: ioredis has no URL form for Sentinels or a Cluster. */
export function redisClientOf(
  settings: SharedStateSettings,
  purpose: RedisClientPurpose = 'commands',
): Redis | Cluster {
  const { topology } = settings;
  const options = purpose === 'events' ? { ...commandOptions, enableOfflineQueue: true } : commandOptions;
  switch (topology.kind) {
    case 'node':
      // A managed endpoint that fails over behind one name may leave a connection on the demoted node.
      return neverGiveUp(
        new Redis(topology.url, {
          ...options,
          reconnectOnError: reconnectWhenDemoted(),
          retryStrategy: reconnectDelay,
        }),
      );
    case 'sentinel':
      return neverGiveUp(
        new Redis({
          ...options,
          ...nodeOptions(topology.credentials, topology.tls),
          sentinels: topology.sentinels.map(({ host, port }) => ({ host, port })),
          name: topology.masterName,
          ...(settings.sentinelPassword === undefined ? {} : { sentinelPassword: settings.sentinelPassword }),
          ...(topology.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
          // Told by the Sentinels of a new master at once (+switch-master), not at the next failed command.
          failoverDetector: true,
          reconnectOnError: reconnectWhenDemoted(),
          retryStrategy: reconnectDelay,
          sentinelRetryStrategy: reconnectDelay,
        }),
      );
    case 'cluster':
      return new Cluster(
        topology.nodes.map(({ host, port }) => ({ host, port })),
        {
          enableOfflineQueue: purpose === 'events',
          shardedSubscribers: purpose === 'events',
          clusterRetryStrategy: reconnectDelay,
          // Writes and reads to masters only: a replica's answer may be behind its master's.
          scaleReads: 'master',
          // A command redirected while slots move is retried this often at most, within the
          // command's own timeout: a failover fails it (the store falls back) rather than wait.
          maxRedirections: 16,
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
          redisOptions: {
            ...options,
            ...nodeOptions(topology.credentials, topology.tls),
            reconnectOnError: reconnectWhenDemoted(),
          },
        },
      );
  }
}
