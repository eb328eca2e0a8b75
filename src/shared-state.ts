import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { GatewayMetrics } from './metrics.js';

/** What a process keeps in Redis when REDIS_URL is set: the limiters' counters and the APQ registrations. */
export type SharedStore = 'limits' | 'apq';

/** One Redis connection per process, shared by the limiters and the APQ store. */
export interface SharedRedis {
  readonly client: Redis;
  /** Whether a command can be sent now; when not, the stores answer from process memory at once. */
  ready(): boolean;
  /** Resolves once connected, or after `timeoutMs` (the gateway serves either way). */
  whenReady(timeoutMs: number): Promise<boolean>;
  /** A store answered from process memory because Redis could not: counted, and warned about. */
  fellBack(store: SharedStore): void;
  close(): Promise<void>;
}

/** A Redis command that takes longer fails, and its store falls back to process memory. */
const COMMAND_TIMEOUT_MS = 500;

/** A warning about Redis at most this often. */
const WARN_EVERY_MS = 10_000;

/**
 * Connects to Redis for the shared stores. The gateway never waits on Redis: while it is
 * unreachable, commands fail at once (no offline queue, no retries per command) and the stores
 * fall back to process memory; ioredis keeps reconnecting (backoff up to 2 s) and they use it
 * again as soon as it is back. One warning per outage and one line when it is over; the messages
 * name no address (the URL may carry a password).
 */
function connectRedis(url: string, logger: Logger, metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>): SharedRedis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: 2_000,
    retryStrategy: (attempt) => Math.min(100 * attempt, 2_000),
  });
  let down = false;
  let lastWarning = 0;
  const warn = (code: unknown) => {
    lastWarning = Date.now();
    logger.warn({ code: typeof code === 'string' ? code : undefined }, 'Redis unreachable: rate limits count per process and APQ registrations stay in process memory until it is back');
  };
  // One warning per outage: a failed command and the connection's own events may both tell of it.
  const lost = (error?: { code?: unknown }) => {
    if (down) return;
    down = true;
    if (Date.now() - lastWarning > WARN_EVERY_MS) warn(error?.code);
  };
  client.on('error', lost);
  client.on('close', () => lost());
  client.on('ready', () => {
    if (down) logger.info('Redis reachable again: rate limits and APQ registrations are shared again');
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
    fellBack(store) {
      metrics.sharedStateFallbacks.inc({ store });
      // A command that failed on a live connection (a timeout) is an outage the events do not tell.
      if (!down && Date.now() - lastWarning > WARN_EVERY_MS) warn(undefined);
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
