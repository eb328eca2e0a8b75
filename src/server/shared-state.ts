import { Redis, ReplyError } from 'ioredis';
import type { Logger } from 'pino';
import type { GatewayMetrics } from './metrics.js';

/** What a process keeps in Redis when REDIS_URL is set: the limiters' counters, the APQ registrations and the response cache. */
export type SharedStore = 'limits' | 'apq' | 'response_cache';

/**
 * Why Redis did not serve a store, as `gateway_shared_state_fallbacks_total{reason}` names it:
 * no connection or no answer in time, or an answer that refused the command (`maxmemory` reached
 * with a policy that evicts nothing, a read-only replica, anything else Redis refuses).
 */
export type FallbackReason = 'unreachable' | 'out_of_memory' | 'read_only' | 'error';

/** One Redis connection per process, shared by the limiters, the APQ store and the response cache. */
export interface SharedRedis {
  readonly client: Redis;
  /** Whether a command can be sent now; when not, the stores answer from process memory at once. */
  ready(): boolean;
  /** Resolves once connected, or after `timeoutMs` (the gateway serves either way). */
  whenReady(timeoutMs: number): Promise<boolean>;
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

/** A warning about Redis at most this often: a refusal lasts as long as Redis stays full. */
const WARN_EVERY_MS = 60_000;

/** A refusal is Redis's answer (its message starts with its code); anything else is no answer. */
function fallbackReason(error: unknown): FallbackReason {
  if (!(error instanceof ReplyError)) return 'unreachable';
  const code = /^[A-Z]+/.exec((error as Error).message)?.[0];
  return code === 'OOM' ? 'out_of_memory' : code === 'READONLY' ? 'read_only' : 'error';
}

const meanwhile = "rate limits count per process, APQ registrations stay in process memory, the response cache misses and a write's eviction from it may be lost";
const warnings: Record<FallbackReason, string> = {
  unreachable: `Redis unreachable: ${meanwhile} until it is back`,
  out_of_memory: `Redis refuses writes (maxmemory reached): ${meanwhile} meanwhile`,
  read_only: `Redis refuses writes (a read-only replica): ${meanwhile} meanwhile`,
  error: `Redis refused a command: ${meanwhile} meanwhile`,
};

/**
 * Connects to Redis for the shared stores. The gateway never waits on Redis: while it is
 * unreachable, commands fail at once (no offline queue, no retries per command) and the stores
 * fall back to process memory; ioredis keeps reconnecting (backoff up to 2 s) and they use it
 * again as soon as it is back. A warning when it goes (or refuses a write), at most one a minute,
 * and one line when it is back; the messages name no address (the URL may carry a password) and
 * quote nothing Redis said beyond its error's code.
 */
function connectRedis(url: string, logger: Logger, metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>): SharedRedis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (attempt) => Math.min(100 * attempt, MAX_RECONNECT_DELAY_MS),
  });
  let down = false;
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
  client.on('error', lost);
  client.on('close', () => lost());
  client.on('ready', () => {
    if (down) logger.info('Redis reachable again: rate limits, APQ registrations and the response cache are shared again');
    down = false;
  });
  return {
    client,
    ready: () => client.status === 'ready',
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
    fellBack(store, error) {
      const reason = fallbackReason(error);
      metrics.sharedStateFallbacks.inc({ store, reason });
      // A refusal, or a command that failed on a live connection (a timeout): the events do not tell.
      warn(reason, { store });
    },
    async close() {
      client.removeAllListeners('error');
      client.on('error', () => {});
      await client.quit().catch(() => client.disconnect());
    },
  };
}

/** How long a starting process waits for Redis before it serves from process memory. */
const START_WAIT_MS = 2_000;

/**
 * The process's Redis for the shared stores (REDIS_URL), its fallbacks counted in `metrics`:
 * resolves once connected or after two seconds, whichever comes first (the gateway serves either way).
 */
export async function connectSharedState(url: string, logger: Logger, metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>): Promise<SharedRedis> {
  const redis = connectRedis(url, logger, metrics);
  await redis.whenReady(START_WAIT_MS);
  return redis;
}
