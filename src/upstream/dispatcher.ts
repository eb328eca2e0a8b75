import { Pool } from 'undici';

/**
 * The upstream pool's settings (UPSTREAM_CONNECTIONS, UPSTREAM_KEEPALIVE_MS, UPSTREAM_MAX_RESPONSE_BYTES); config.ts
 * holds their defaults.
 */
export interface DispatcherOptions {
  readonly baseUrl: string;
  readonly connections: number;
  /** Shorter than the upstream's own keep-alive, so we never send on a socket it is closing. */
  readonly keepAliveTimeoutMs: number;
  /** Largest upstream body: undici refuses a larger one as its bytes arrive. */
  readonly maxResponseBytes: number;
}

/** One pool per process: keep-alive connections to the upstream's origin, shared by all requests. */
export function createUpstreamDispatcher(options: DispatcherOptions): Pool {
  return new Pool(new URL(options.baseUrl).origin, {
    connections: options.connections,
    keepAliveTimeout: options.keepAliveTimeoutMs,
    keepAliveMaxTimeout: options.keepAliveTimeoutMs,
    maxResponseSize: options.maxResponseBytes,
  });
}

/** The longest a reading of the pool's queue is reused: undici's stats walk every connection (some 5 µs for 100). */
const QUEUE_READ_EVERY_MS = 10;

/**
 * The calls waiting in `pool`'s queue for a connection (undici's `stats.queued`: every connection
 * busy), read at most every QUEUE_READ_EVERY_MS however often it is asked: it is asked per
 * operation, and a queue builds over whole upstream calls.
 */
export function queuedCallsOf(pool: Pool): () => number {
  let readAt = Number.NEGATIVE_INFINITY;
  let queued = 0;
  return () => {
    const now = performance.now();
    if (now - readAt >= QUEUE_READ_EVERY_MS) {
      queued = pool.stats.queued;
      readAt = now;
    }
    return queued;
  };
}
