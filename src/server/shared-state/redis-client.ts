import { performance } from 'node:perf_hooks';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisCredentials, SharedStateSettings } from '../../config.js';

/** A Redis command that takes longer fails, and its store falls back to process memory. */
export const COMMAND_TIMEOUT_MS = 500;

const CONNECT_TIMEOUT_MS = 2_000;
const MAX_RECONNECT_DELAY_MS = 2_000;

const reconnectDelay = (attempt: number) => Math.min(100 * attempt, MAX_RECONNECT_DELAY_MS);

/** At most this often: a node that stays a replica is not reconnected to at every write. */
const READONLY_RECONNECT_EVERY_MS = 10_000;

/** A failover's demoted master answers writes READONLY: reconnect, unsent (1, not 2: a limiter would count twice). */
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

/** ioredis 5 ends a connection at one Sentinel failover in ten ("Connection is closed."): one not quit reconnects. */
function neverGiveUp(client: Redis): Redis {
  let attempts = 0;
  client.on('ready', () => (attempts = 0));
  client.on('end', () => {
    if (!quitting.has(client))
      setTimeout(() => void client.connect().catch(() => {}), reconnectDelay(++attempts)).unref();
  });
  return client;
}

const nodeOptions = (credentials: RedisCredentials, tls: boolean): RedisOptions => ({
  ...(credentials.username === undefined ? {} : { username: credentials.username }),
  ...(credentials.password === undefined ? {} : { password: credentials.password }),
  ...(tls ? { tls: {} } : {}),
});

/** A topology's client (ioredis has no URL form for Sentinels or a Cluster); `events`: pub/sub (sharded on Cluster). */
export function redisClientOf(
  settings: SharedStateSettings,
  purpose: 'commands' | 'events' = 'commands',
): Redis | Cluster {
  const { topology } = settings;
  const events = purpose === 'events';
  // For every node of every topology: a command is never waited on (but a subscription waits for the connection).
  const options: RedisOptions = {
    enableOfflineQueue: events,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    reconnectOnError: reconnectWhenDemoted(),
  };
  switch (topology.kind) {
    case 'node':
      // A managed endpoint that fails over behind one name may leave a connection on the demoted node.
      return neverGiveUp(new Redis(topology.url, { ...options, retryStrategy: reconnectDelay }));
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
          retryStrategy: reconnectDelay,
          sentinelRetryStrategy: reconnectDelay,
        }),
      );
    case 'cluster':
      return new Cluster(
        topology.nodes.map(({ host, port }) => ({ host, port })),
        {
          enableOfflineQueue: events,
          shardedSubscribers: events,
          clusterRetryStrategy: reconnectDelay,
          // Writes and reads to masters only: a replica's answer may be behind its master's.
          scaleReads: 'master',
          // Retried within the command's own timeout: a failover fails it (the store falls back) rather than wait.
          maxRedirections: 16,
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
          redisOptions: { ...options, ...nodeOptions(topology.credentials, topology.tls) },
        },
      );
  }
}
