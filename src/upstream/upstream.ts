import type { Pool } from 'undici';
import type { Config } from '../config.js';
import type { RouteTable } from './routes.js';
import {
  createUpstreamDispatcher,
  UpstreamTransport,
  type CallContext,
  type RetryPolicy,
  type UpstreamAttempt,
  type UpstreamCaller,
} from './transport.js';

export interface UpstreamOptions {
  readonly baseUrl: string;
  readonly routes: RouteTable;
  readonly timeoutMs: number;
  readonly connections: number;
  readonly keepAliveTimeoutMs?: number;
  readonly maxResponseBytes?: number;
  readonly retry?: RetryPolicy;
  readonly onAttempt?: (attempt: UpstreamAttempt) => void;
}

/** The upstream options an operator configured, for the upstream at `baseUrl`. */
export function upstreamOptionsFrom(config: Config, baseUrl: string): UpstreamOptions {
  return {
    baseUrl,
    routes: config.routes,
    timeoutMs: config.upstreamTimeoutMs,
    connections: config.upstreamConnections,
    keepAliveTimeoutMs: config.upstreamKeepAliveMs,
    maxResponseBytes: config.upstreamMaxResponseBytes,
  };
}

/** The process-wide side of the upstream layer: one pool, one transport; callers are per request. */
export interface Upstream {
  readonly transport: UpstreamTransport;
  readonly dispatcher: Pool;
  forRequest(context: CallContext): UpstreamCaller;
  close(): Promise<void>;
}

export function createUpstream(options: UpstreamOptions): Upstream {
  const dispatcher = createUpstreamDispatcher(options);
  const transport = new UpstreamTransport({ ...options, dispatcher });
  return {
    transport,
    dispatcher,
    forRequest: (context) => transport.forRequest(context),
    close: () => dispatcher.close(),
  };
}
