import type { Plugin } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { GatewayContext } from '../context.js';
import type { GatewayMetrics } from '../metrics.js';

export interface OperabilityOptions {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /** Whether the upstream answered recently (cached by the caller). */
  readonly ready: () => Promise<boolean>;
}

/** /health, /ready, /metrics and one structured log line per operation. (Filled in next.) */
export function useOperability(_options: OperabilityOptions): Plugin<GatewayContext> {
  return {};
}
