import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import slotOf from 'cluster-key-slot';
import { Cluster, Redis, ReplyError, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisCredentials, SharedStateSettings } from '../../config.js';
import type { GatewayMetrics } from '../instruments/metrics.js';

/** What a process keeps in Redis when REDIS_URL is set: the limiters' counters, the APQ registrations and the response cache. */
export type SharedStore = 'limits' | 'apq' | 'response_cache';

/**
 * Why Redis did not serve a store, as `gateway_shared_state_fallbacks_total{reason}` names it:
 * no connection or no answer in time, or an answer that refused the command (`maxmemory` reached
 * with a policy that evicts nothing, a read-only replica, anything else Redis refuses).
 */
export type FallbackReason = 'unreachable' | 'out_of_memory' | 'read_only' | 'error';

/** One Redis connection per process (one client per topology), shared by the limiters, the APQ store and the response cache. */
export interface SharedRedis {
  /** One node or a Sentinel-watched master (`Redis`), or a Cluster: the same commands either way. */
  readonly client: Redis | Cluster;
  /** Whether a command can be sent now; when not, the stores answer from process memory at once. */
  ready(): boolean;
  /** Resolves once connected, or after `timeoutMs` (the gateway serves either way). */
  whenReady(timeoutMs: number): Promise<boolean>;
  /**
   * `items` in groups whose keys (`keyOf`) may go in one script or multi-key command: on a
   * Cluster one group per hash slot (Redis refuses a command across slots: CROSSSLOT), on one
   * node or a Sentinel-watched master all of them in one group.
   */
  bySlot<T>(items: readonly T[], keyOf: (item: T) => string): T[][];
  /** Calls `listener` each time Redis answers again after a loss: a reconnection, a new master, a Cluster's slots on new masters. */
  onBack(listener: () => void): void;
  /** Runs `task` as the process stops, before the connection closes (bounded: two command timeouts). */
  beforeClose(task: () => Promise<unknown>): void;
  /**
   * A store answered from process memory because Redis could not (`error`: the command's failure;
   * none when it was not sent): counted by reason, and warned about.
   */
  fellBack(store: SharedStore, error?: unknown): void;
  close(): Promise<void>;
}

/** A Redis command that takes longer fails, and its store falls back to process memory. */
const COMMAND_TIMEOUT_MS = 500;

/** How long one attempt to connect may take before ioredis tries again. */
const CONNECT_TIMEOUT_MS = 2_000;

/** The longest wait between two attempts to reconnect (100 ms more after each failed one until then). */
const MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * After a command that failed on a connection that looked fine (it timed out; a Cluster master
 * gone, whose slots wait for a failover), Redis is left alone this long: the stores answer from
 * process memory at once instead of each request waiting out the command timeout.
 */
const QUIET_AFTER_TIMEOUT_MS = 1_000;

/** How long a stopping process lets the stores finish with Redis (an owed eviction made at last). */
const LAST_WORDS_MS = 2 * COMMAND_TIMEOUT_MS;

/** A warning about Redis at most this often: a refusal lasts as long as Redis stays full. */
const WARN_EVERY_MS = 60_000;

/** A refusal is Redis's answer (its message starts with its code); anything else is no answer. */
function fallbackReason(error: unknown): FallbackReason {
  if (!(error instanceof ReplyError)) return 'unreachable';
  const code = /^[A-Z]+/.exec((error as Error).message)?.[0];
  return code === 'OOM' ? 'out_of_memory' : code === 'READONLY' ? 'read_only' : 'error';
}

const meanwhile = "rate limits count per process, APQ registrations stay in process memory, the response cache misses and a write's eviction from it waits";
const warnings: Record<FallbackReason, string> = {
  unreachable: `Redis unreachable: ${meanwhile} until it is back`,
  out_of_memory: `Redis refuses writes (maxmemory reached): ${meanwhile} meanwhile`,
  read_only: `Redis refuses writes (a read-only replica): ${meanwhile} meanwhile`,
  error: `Redis refused a command: ${meanwhile} meanwhile`,
};

/** How a command is answered and how the connection comes back, for every node of every topology: never waited on. */
const commandOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: COMMAND_TIMEOUT_MS,
  connectTimeout: CONNECT_TIMEOUT_MS,
} satisfies RedisOptions;

const reconnectDelay = (attempt: number) => Math.min(100 * attempt, MAX_RECONNECT_DELAY_MS);

/** A connection answered READONLY is made again at most this often (a node that stays a replica is not reconnected to at every write). */
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

/** Redis's own user and password, and TLS (`rediss…`), as ioredis takes them. */
const nodeOptions = (credentials: RedisCredentials, tls: boolean): RedisOptions => ({
  ...(credentials.username === undefined ? {} : { username: credentials.username }),
  ...(credentials.password === undefined ? {} : { password: credentials.password }),
  ...(tls ? { tls: {} } : {}),
});

/** The ioredis client of a topology: ioredis has no URL form for Sentinels or a Cluster. */
function clientOf(settings: SharedStateSettings): Redis | Cluster {
  const { topology } = settings;
  switch (topology.kind) {
    case 'node':
      // A managed endpoint that fails over behind one name may leave a connection on the demoted node.
      return new Redis(topology.url, { ...commandOptions, reconnectOnError: reconnectWhenDemoted(), retryStrategy: reconnectDelay });
    case 'sentinel':
      return new Redis({
        ...commandOptions,
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
      });
    case 'cluster':
      return new Cluster(
        topology.nodes.map(({ host, port }) => ({ host, port })),
        {
          enableOfflineQueue: false,
          clusterRetryStrategy: reconnectDelay,
          // Writes and reads to masters only: a replica's answer may be behind its master's.
          scaleReads: 'master',
          // A command redirected while slots move is retried this often at most, within the
          // command's own timeout: a failover fails it (the store falls back) rather than wait.
          maxRedirections: 16,
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          slotsRefreshTimeout: CONNECT_TIMEOUT_MS,
          redisOptions: { ...commandOptions, ...nodeOptions(topology.credentials, topology.tls), reconnectOnError: reconnectWhenDemoted() },
        },
      );
  }
}

/**
 * Connects to Redis for the shared stores. The gateway never waits on Redis: while it is
 * unreachable, commands fail at once (no offline queue, no retries per command) and the stores
 * fall back to process memory; ioredis keeps reconnecting (backoff up to 2 s; to the master the
 * Sentinels name, or to the Cluster's nodes as its slots say) and they use it again as soon as
 * it answers. A warning when it goes (or refuses a write), at most one a minute, and one line
 * when it is back; the messages name no address (the URL may carry a password) and quote
 * nothing Redis said beyond its error's code.
 */
function connectRedis(settings: SharedStateSettings, logger: Logger, metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>): SharedRedis {
  const client = clientOf(settings);
  const cluster = client instanceof Cluster;
  const comeBack = new Set<() => void>();
  const lastWords = new Set<() => Promise<unknown>>();
  let down = false;
  let quietUntil = 0;
  let lastWarning = -Infinity;
  const warn = (reason: FallbackReason, fields: { code?: string; store?: SharedStore }) => {
    if (Date.now() - lastWarning < WARN_EVERY_MS) return;
    lastWarning = Date.now();
    logger.warn({ reason, ...fields }, warnings[reason]);
  };
  // A failed command and the connection's own events may both tell of one outage.
  const lost = (error?: { code?: unknown }) => {
    if (down) return;
    down = true;
    warn('unreachable', typeof error?.code === 'string' ? { code: error.code } : {});
  };
  const back = () => {
    if (down) logger.info('Redis reachable again: rate limits, APQ registrations and the response cache are shared again');
    down = false;
    // A new connection (or node): what timed out on the old one says nothing of it.
    quietUntil = 0;
    for (const listener of comeBack) listener();
  };
  client.on('error', lost);
  client.on('close', () => lost());
  client.on('ready', back);
  // A Cluster stays 'ready' while one of its masters is replaced: the news is its slots owned by
  // other masters (a replica promoted), seen as its slots are refreshed. Not its nodes coming and
  // going: a dead master is dropped and added again at each refresh until it is replaced.
  if (client instanceof Cluster) {
    let owners = '';
    client.on('refresh', () => {
      const now = [...new Set(client.slots.map((nodes) => nodes[0]))].sort().join(',');
      if (owners !== '' && now !== owners) back();
      owners = now;
    });
  }
  return {
    client,
    ready: () => client.status === 'ready' && performance.now() >= quietUntil,
    async whenReady(timeoutMs) {
      if (client.status === 'ready') return true;
      let timer: NodeJS.Timeout | undefined;
      const ready = await Promise.race([
        new Promise<boolean>((resolve) => client.once('ready', () => resolve(true))),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
      ]);
      clearTimeout(timer);
      return ready;
    },
    bySlot(items, keyOf) {
      if (!cluster) return items.length === 0 ? [] : [[...items]];
      const groups = new Map<number, (typeof items)[number][]>();
      for (const item of items) {
        const slot = slotOf(keyOf(item));
        const group = groups.get(slot);
        if (group === undefined) groups.set(slot, [item]);
        else group.push(item);
      }
      return [...groups.values()];
    },
    onBack(listener) {
      comeBack.add(listener);
    },
    beforeClose(task) {
      lastWords.add(task);
    },
    fellBack(store, error) {
      const reason = fallbackReason(error);
      metrics.sharedStateFallbacks.inc({ store, reason });
      if (error !== undefined && reason === 'unreachable' && client.status === 'ready') quietUntil = performance.now() + QUIET_AFTER_TIMEOUT_MS;
      // A refusal, or a command that failed on a live connection (a timeout): the events do not tell.
      warn(reason, { store });
    },
    async close() {
      // What the stores still owe Redis (an eviction a cut held back), for as long as a command may take.
      if (lastWords.size > 0) await Promise.race([Promise.allSettled([...lastWords].map((task) => task())), sleep(LAST_WORDS_MS, undefined, { ref: false })]);
      comeBack.clear();
      // Quitting is no outage: nothing to warn about.
      client.removeAllListeners('error');
      client.removeAllListeners('close');
      client.on('error', () => {});
      await client.quit().catch(() => client.disconnect());
    },
  };
}

/**
 * A value the stores keep with its expiry in front (`<ms since 1970>:<text>`), so that one read
 * says both: what `stamped` writes, or undefined for anything else (a write's placeholder, a
 * value an older build kept).
 */
export function readStamped(value: string | null): { readonly expiresAt: number; readonly text: string } | undefined {
  const colon = value === null ? -1 : value.indexOf(':');
  const expiresAt = Number(value?.slice(0, colon));
  return colon === -1 || !Number.isSafeInteger(expiresAt) ? undefined : { expiresAt, text: value!.slice(colon + 1) };
}

export const stamped = (expiresAt: number, text: string): string => `${expiresAt}:${text}`;

/** How long a starting process waits for Redis before it serves from process memory. */
const START_WAIT_MS = 2_000;

/**
 * The process's Redis for the shared stores (REDIS_URL), its fallbacks counted in `metrics`:
 * resolves once connected or after two seconds, whichever comes first (the gateway serves either way).
 */
export async function connectSharedState(settings: SharedStateSettings, logger: Logger, metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>): Promise<SharedRedis> {
  const redis = connectRedis(settings, logger, metrics);
  await redis.whenReady(START_WAIT_MS);
  return redis;
}
