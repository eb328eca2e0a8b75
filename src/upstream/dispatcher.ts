import { Pool } from 'undici';

/** The upstream pool's settings (UPSTREAM_CONNECTIONS, UPSTREAM_KEEPALIVE_MS, UPSTREAM_MAX_RESPONSE_BYTES); config.ts holds their defaults. */
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
