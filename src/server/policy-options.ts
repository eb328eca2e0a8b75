import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { Upstream } from '../upstream/upstream.js';
import type { PersistedQueryStore } from './documents/apq-store.js';
import type { GatewayMetrics } from './instruments/metrics.js';
import type { SharedRedis } from './shared-state/shared-redis.js';

/** The part of the configuration the gateway's policies use. */
export type GatewaySettings = Pick<
  Config,
  | 'upstreamFanout'
  | 'upstreamCallBudget'
  | 'maxResultItems'
  | 'maxResponseBytes'
  | 'operationTimeoutMs'
  | 'introspection'
  | 'planner'
  | 'compiledExecution'
  | 'compiledQueries'
  | 'compiledDocuments'
  | 'documentCache'
  | 'corsOrigins'
  | 'csrfPrevention'
  | 'limits'
  | 'maxBatch'
  | 'persistedDocuments'
  | 'callerLimits'
  | 'loadShedding'
  | 'responseCache'
  | 'metricsOperations'
  | 'metricsClients'
  | 'schemaUsage'
  | 'operationLog'
  | 'production'
  | 'subscriptions'
  | 'websocket'
  | 'logins'
  | 'subgraphPath'
>;

export interface PolicyOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  readonly settings: GatewaySettings;
  readonly metrics: GatewayMetrics;
  readonly tracing: Tracing;
  /** Where APQ registrations go. @default in Redis with `redis`, else in this process's memory, bounded */
  readonly apqStore?: PersistedQueryStore | undefined;
  /** Redis (REDIS_URL) for what every process shares (limits, APQ, cache, events). @default none: process memory */
  readonly redis?: SharedRedis | undefined;
  /** The response cache's own Redis (RESPONSE_CACHE_REDIS_URL). @default `redis` */
  readonly cacheRedis?: SharedRedis | undefined;
  /** One of WORKERS>1 behind a port: without Redis, head events reach the others via the primary. @default false */
  readonly clusterWorker?: boolean | undefined;
}
