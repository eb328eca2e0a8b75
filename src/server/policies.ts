import { schema } from '../schema/index.js';
import { subgraphSchema } from '../schema/subgraph.js';
import { useAnswerBody } from './answers/answer.js';
import { useAnswerHeaders } from './answers/answer-headers.js';
import { useCors } from './answers/cors.js';
import { errorMasking } from './answers/masking.js';
import { useContentNegotiation } from './answers/negotiation.js';
import { retryAfter } from './answers/retry-after.js';
import { createMemoryQueryStore, createRedisQueryStore, type PersistedQueryStore } from './documents/apq-store.js';
import { usePersistedDocuments } from './documents/persisted-documents.js';
import { operationNamesOf } from './documents/trusted-documents.js';
import { csrfCheck, hiddenExecutionSuggestions } from './guards/operation-limits.js';
import { ClientAwareness } from './instruments/client-awareness.js';
import { useBatching } from './intake/batching.js';
import { useRequestBody } from './intake/body.js';
import { graphqlMethods } from './intake/method.js';
import { paramsCheck, useRequestParams, variablesDepth } from './intake/params.js';
import type { PreparedOperationState } from './operation-state.js';
import type { MaybePromise } from './pipeline/stages.js';
import type { PolicyOptions } from './policy-options.js';
import { useHeadEvents } from './real-time/head-events.js';
import { headPolling } from './real-time/head-polling.js';
import { useSubscriptions } from './real-time/subscriptions.js';
import type { OperationResult } from './request-state.js';
import { responseCacheOf } from './response-cache/plugin.js';
import { type SharedParts, schemaPolicies } from './schema-policies.js';
import { OperationRecorder, useOperationTelemetry } from './telemetry/operation-telemetry.js';
import { useCallerLimits } from './traffic/caller-limits.js';
import { useEventsInFlight, useInFlight } from './traffic/in-flight.js';
import { createCallerLimiters } from './traffic/limiters.js';
import { LoadShedder, overloadReasons } from './traffic/load-shedder.js';
import { useLoginLimits } from './traffic/login-limits.js';
import { overloadLog } from './traffic/overload-log.js';

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

/** Head events (a write's changes told to their watchers), polling for changes made elsewhere, subscriptions. */
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

/** Every policy of the gateway, made once from its settings (one that is off undefined); gateway.ts orders them. */
export function gatewayPolicies(options: PolicyOptions) {
  const { settings, metrics } = options;
  const countRefusal = (limit: string) => metrics.refusals.inc({ limit });
  const refused = (limit: string) => () => countRefusal(limit);
  const limiters = createCallerLimiters(settings.callerLimits, {
    redis: options.redis,
    inFlightTtlSeconds: Math.ceil((2 * settings.operationTimeoutMs) / 1000),
  });
  // What both schemas' policies share: the subscriptions' source (made after the engine they run on: the plan's
  // context hands it on), the refusals' count, the response cache's one store.
  const shared: SharedParts = {
    headChanges: (id, context) => subscriptions.headChanges(id, context),
    countRefusal,
    cache:
      settings.responseCache === undefined
        ? undefined
        : responseCacheOf(
            settings.responseCache,
            settings.operationTimeoutMs,
            metrics,
            options.cacheRedis ?? options.redis,
          ),
  };
  const graphql = schemaPolicies(options, schema, shared);
  const { headEvents, subscriptions } = realTime(options, graphql.engine.execute);
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
    ...graphql.policies,
    // SUBGRAPH_PATH: the same policies but these, made for the subgraph schema.
    subgraph:
      settings.subgraphPath === undefined ? undefined : schemaPolicies(options, subgraphSchema, shared).policies,
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
