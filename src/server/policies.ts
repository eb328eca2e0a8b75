import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { Planner } from '../plan/operation-plan.js';
import type { ContextOptions, HeadChangeSource } from '../schema/context.js';
import { schema } from '../schema/index.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { Upstream } from '../upstream/upstream.js';
import { useAnswerBody } from './answers/answer.js';
import { useAnswerHeaders } from './answers/answer-headers.js';
import { useCors } from './answers/cors.js';
import { errorMasking } from './answers/masking.js';
import { useContentNegotiation, useIncrementalDelivery } from './answers/negotiation.js';
import { retryAfter } from './answers/retry-after.js';
import { createMemoryQueryStore, createRedisQueryStore, type PersistedQueryStore } from './documents/apq-store.js';
import { compiledExecution } from './documents/compiled-execution.js';
import { useCoordinateUsage } from './documents/coordinate-usage.js';
import { gatewayEnvelop } from './documents/execution.js';
import { incrementalDeliveryRules } from './documents/incremental-delivery.js';
import { usePersistedDocuments } from './documents/persisted-documents.js';
import { preparedDocuments } from './documents/prepared.js';
import { operationNamesOf } from './documents/trusted-documents.js';
import { planAdmission, useUpstreamPlan } from './documents/upstream-plan.js';
import { fragmentPairsLimit } from './guards/fragment-pairs.js';
import { csrfCheck, documentPolicies, hiddenExecutionSuggestions } from './guards/operation-limits.js';
import { ClientAwareness } from './instruments/client-awareness.js';
import type { GatewayMetrics } from './instruments/metrics.js';
import { useBatching } from './intake/batching.js';
import { useRequestBody } from './intake/body.js';
import { graphqlMethods } from './intake/method.js';
import { paramsCheck, useRequestParams, variablesDepth } from './intake/params.js';
import type { PreparedOperationState } from './operation-state.js';
import type { MaybePromise } from './pipeline/stages.js';
import { useHeadEvents } from './real-time/head-events.js';
import { headPolling } from './real-time/head-polling.js';
import { useSubscriptions } from './real-time/subscriptions.js';
import type { OperationResult } from './request-state.js';
import { responseCachePlugin } from './response-cache/plugin.js';
import type { SharedRedis } from './shared-state/shared-redis.js';
import { OperationRecorder, useOperationTelemetry } from './telemetry/operation-telemetry.js';
import { useCallerLimits } from './traffic/caller-limits.js';
import { useEventsInFlight, useInFlight } from './traffic/in-flight.js';
import { createCallerLimiters } from './traffic/limiters.js';
import { LoadShedder, overloadReasons } from './traffic/load-shedder.js';
import { useLoginLimits } from './traffic/login-limits.js';
import { overloadLog } from './traffic/overload-log.js';

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

/** The shedder, its refusals counted and its load watched by the metrics. */
function loadShedder(options: PolicyOptions): LoadShedder {
  const { metrics } = options;
  const overloaded = metrics.refusals.labels({ limit: 'overloaded' });
  const shedder = new LoadShedder(options.settings.loadShedding, {
    queuedCalls: options.upstream.queuedCalls,
    onRefused: (reason) => {
      overloaded.inc();
      metrics.overloadRefusals.inc({ reason });
    },
  });
  metrics.watchLoad(shedder);
  // Every reason's series exists from the start (at 0), so a rate over it has a beginning.
  for (const reason of overloadReasons) metrics.overloadRefusals.inc({ reason }, 0);
  return shedder;
}

/** The operation recorder: the manifest's and the operator's names apart in metrics, the others in a bounded pool. */
function operationRecorder(options: PolicyOptions): OperationRecorder {
  const { settings } = options;
  const { trustedDocuments } = settings.persistedDocuments;
  return new OperationRecorder({
    metrics: options.metrics,
    logger: options.logger,
    log: settings.operationLog,
    tracing: options.tracing,
    clients: new ClientAwareness(settings.metricsClients),
    operationNames: new Set([
      ...(trustedDocuments ? operationNamesOf(trustedDocuments) : []),
      ...settings.metricsOperations.known,
    ]),
    maxOperationNames: settings.metricsOperations.max,
  });
}

/** Where APQ registrations go: given, or Redis in front of this process's memory, or memory alone. */
function apqStoreOf(options: PolicyOptions): PersistedQueryStore {
  const { persistedDocuments } = options.settings;
  const bounds = {
    maxEntries: persistedDocuments.apqMaxEntries,
    maxBytes: persistedDocuments.apqMaxBytes,
    ownerShare: persistedDocuments.apqCallerShare,
  };
  const local = createMemoryQueryStore(bounds);
  return (
    options.apqStore ??
    (options.redis
      ? createRedisQueryStore({ redis: options.redis, local, ttlSeconds: persistedDocuments.apqTtlSeconds, ...bounds })
      : local)
  );
}

/** Execution's engine (compiled or interpreted), in the envelop that runs the document policies and the cache's. */
function execution(options: PolicyOptions, responseCache: ReturnType<typeof responseCachePlugin> | undefined) {
  const { settings, metrics } = options;
  const compiled = settings.compiledExecution
    ? compiledExecution({
        ...settings.compiledQueries,
        ...settings.compiledDocuments,
        onCompiledRun: () => metrics.compiledExecutions.inc(),
        watchCache: (use) => metrics.watchDocumentCache('compiled', use),
      })
    : undefined;
  const documents = documentPolicies({
    limits: settings.limits,
    introspection: settings.introspection,
    hideSuggestions: settings.production,
  });
  return gatewayEnvelop({
    schema,
    compiled,
    plugins: [...documents, incrementalDeliveryRules, ...(responseCache?.envelop ?? [])],
  });
}

/**
 * The real-time policies: head events (a write's changes told to their watchers), polling for changes made elsewhere,
 * subscriptions and live queries.
 */
function realTime(
  options: PolicyOptions,
  execute: (operation: PreparedOperationState) => MaybePromise<OperationResult>,
) {
  const { settings, metrics } = options;
  const { realTime: counts } = metrics;
  counts.limit.set(settings.subscriptions.max);
  const headEvents = useHeadEvents({
    schema,
    redis: options.redis,
    onPublishFailed: (error) => options.redis?.fellBack('events', error),
    onPublished: () => counts.published.inc({ source: 'write' }),
    replayMs: settings.subscriptions.replayMs,
    workers: options.clusterWorker,
  });
  const polling = headPolling({
    upstream: options.upstream,
    publish: headEvents.publish,
    intervalMs: settings.subscriptions.pollMs,
    concurrency: settings.subscriptions.pollConcurrency,
    redis: options.redis,
    onRead: (outcome) => {
      counts.pollReads.inc({ outcome });
      if (outcome === 'changed' || outcome === 'deleted') counts.published.inc({ source: 'poll' });
    },
  });
  const subscriptions = useSubscriptions({
    schema,
    events: headEvents,
    limits: settings.subscriptions,
    liveThrottleMs: settings.subscriptions.liveThrottleMs,
    polling,
    metrics: counts,
    execute,
    onRefused: () => metrics.refusals.inc({ limit: 'subscriptions' }),
  });
  return { headEvents, subscriptions };
}

/** The response cache, the engine whose envelop runs its plugins, and the documents that envelop prepares. */
function documentsAndEngine(options: PolicyOptions, countRefusal: (limit: string) => void) {
  const { settings, metrics } = options;
  const responseCache =
    settings.responseCache === undefined
      ? undefined
      : responseCachePlugin(
          settings.responseCache,
          schema,
          settings.operationTimeoutMs,
          metrics,
          options.cacheRedis ?? options.redis,
        );
  const engine = execution(options, responseCache);
  const fragmentPairs = fragmentPairsLimit({
    max: settings.limits.maxFragmentPairs,
    onRefused: () => countRefusal('fragments'),
  });
  const documents = preparedDocuments({
    envelop: engine.getEnveloped,
    bounds: settings.documentCache,
    maxDepth: settings.limits.maxDepth,
    onRefused: countRefusal,
    budget: fragmentPairs,
  });
  metrics.watchDocumentCache('parsed', documents.use);
  return { responseCache, engine, documents };
}

/** The plan stage's policy: each operation planned, admitted within the call budget and items limit, run upstream. */
function upstreamPlan(options: PolicyOptions, headChanges: HeadChangeSource, countRefusal: (limit: string) => void) {
  const { settings } = options;
  const contextOptions: ContextOptions = {
    upstream: options.upstream,
    logger: options.logger,
    fanout: settings.upstreamFanout,
    budget: settings.upstreamCallBudget,
    deadlineMs: settings.operationTimeoutMs,
    strategy: settings.planner,
    headChanges,
  };
  const planner = new Planner({ schema, strategy: settings.planner });
  return useUpstreamPlan(
    planAdmission({
      planner,
      budget: settings.upstreamCallBudget,
      maxItems: settings.maxResultItems,
      onRefused: countRefusal,
      tracing: options.tracing,
    }),
    contextOptions,
  );
}

/**
 * Every policy of the gateway, made once from its settings (a policy that is off is undefined):
 * gateway.ts lists them in the order their steps run.
 */
export function gatewayPolicies(options: PolicyOptions) {
  const { settings, metrics } = options;
  const countRefusal = (limit: string) => metrics.refusals.inc({ limit });
  const refused = (limit: string) => () => countRefusal(limit);
  const limiters = createCallerLimiters(settings.callerLimits, {
    redis: options.redis,
    inFlightTtlSeconds: Math.ceil((2 * settings.operationTimeoutMs) / 1000),
  });
  const { responseCache, engine, documents } = documentsAndEngine(options, countRefusal);
  const { headEvents, subscriptions } = realTime(options, engine.execute);
  const body = useRequestBody({ maxBytes: settings.limits.maxBodyBytes, onRefused: refused('body') });
  const shedder = loadShedder(options);
  const overloaded = overloadLog(options.logger);
  return {
    shedder,
    headEvents,
    subscriptions,
    inFlight: useInFlight(shedder, overloaded),
    eventsInFlight: useEventsInFlight(shedder, overloaded),
    telemetry: useOperationTelemetry(operationRecorder(options)),
    contentNegotiation: useContentNegotiation(),
    callerLimits: useCallerLimits({ limiters, onRefused: countRefusal }),
    loginLimits: useLoginLimits({
      schema,
      settings: settings.logins,
      redis: options.redis,
      onRefused: refused('logins'),
    }),
    body,
    csrf: settings.csrfPrevention ? csrfCheck : undefined,
    method: graphqlMethods,
    params: useRequestParams((request, use) => body.read(request.http.body, request.headers, use)),
    batching: useBatching({ maxBatch: settings.maxBatch, onRefused: refused('batch') }),
    variablesDepth: variablesDepth({
      maxVariablesDepth: settings.limits.maxVariablesDepth,
      onRefused: refused('variables_depth'),
    }),
    persisted: usePersistedDocuments({
      apqStore: apqStoreOf(options),
      trustedDocuments: settings.persistedDocuments.trustedDocuments,
      trustedDocumentsOnly: settings.persistedDocuments.trustedDocumentsOnly,
    }),
    paramsCheck,
    documents,
    coordinateUsage: settings.schemaUsage
      ? useCoordinateUsage({ schema, metrics: metrics.schemaUsage, logger: options.logger })
      : undefined,
    incrementalDelivery: useIncrementalDelivery({ schema }),
    responseCache,
    upstreamPlan: upstreamPlan(options, subscriptions.headChanges, countRefusal),
    execution: engine.policy,
    hiddenSuggestions: settings.production ? hiddenExecutionSuggestions : undefined,
    masking: errorMasking(options.logger),
    retryAfter,
    answerBody: useAnswerBody({
      maxBytes: settings.maxResponseBytes,
      onRefused: refused('response_bytes'),
      onAbandoned: () => metrics.abandonedAnswers.inc(),
      stream: {
        heartbeatMs: settings.subscriptions.heartbeatMs,
        onStalled: () => metrics.realTime.streamsCut.inc({ reason: 'stalled' }),
      },
    }),
    cors: useCors(settings.corsOrigins),
    cacheHeaders: useAnswerHeaders({ cors: settings.corsOrigins.length > 0 }),
  };
}
