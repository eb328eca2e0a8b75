import type { GraphQLError } from 'graphql';
import { createYoga, processRegularResult, useExecutionCancellation, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { Planner } from '../plan/operation-plan.js';
import { createContext, requestIdFrom, type ContextOptions, type GatewayContext } from '../schema/context.js';
import { errorLogEntry, maskError } from '../schema/errors.js';
import { schema } from '../schema/index.js';
import { createTracing, type Tracing } from '../telemetry/tracing.js';
import type { CircuitStateName } from '../upstream/circuit.js';
import type { CircuitName } from '../upstream/circuits.js';
import { CIRCUIT_OPEN } from '../upstream/errors.js';
import type { UpstreamAttempt } from '../upstream/transport.js';
import { createUpstream, type Upstream, type UpstreamOptions } from '../upstream/upstream.js';
import { useAnswerHeaders } from './answers/answer-headers.js';
import { corsPolicy } from './answers/cors.js';
import { useRetryAfter, withRetryAfter } from './answers/retry-after.js';
import { useContentNegotiation } from './answers/negotiation.js';
import { useResponseSizeLimit } from './answers/size-limit.js';
import { createMemoryQueryStore, createRedisQueryStore, type PersistedQueryStore } from './documents/apq-store.js';
import { compiledExecution } from './documents/compiled-execution.js';
import { useIncrementalDelivery } from './documents/incremental-delivery.js';
import { boundedParseCache } from './documents/parse-cache.js';
import { persistedDocumentParams, usePersistedDocuments } from './documents/persisted-documents.js';
import { operationNamesOf } from './documents/trusted-documents.js';
import { planAdmission, useUpstreamPlan } from './documents/upstream-plan.js';
import { useOperationLimits } from './guards/operation-limits.js';
import type { EarlyRefusal } from './http/refusal.js';
import { useBatching } from './intake/batching.js';
import { useRequestBody } from './intake/body.js';
import { useStrictRequestParams } from './intake/params.js';
import { useFrontDoor } from './pages/front-door.js';
import { graphiQLPage, useGraphiQLCache } from './pages/graphiql-cache.js';
import { defaultGraphiQLQuery, renderGraphiQLPage } from './pages/graphiql-page.js';
import { createReadiness, upstreamAnswers } from './probes/readiness.js';
import { useProbes } from './probes/routes.js';
import { operationStateOf, requestStateOf, useRequestState } from './request-state.js';
import { withLane, type Handler, type HotQueries } from './lane.js';
import { responseCachePlugin } from './response-cache/plugin.js';
import type { SharedRedis } from './shared-state/shared-redis.js';
import { ClientAwareness } from './instruments/client-awareness.js';
import type { GatewayMetrics } from './instruments/metrics.js';
import { OperationRecorder, useOperationTelemetry } from './telemetry/operation-telemetry.js';
import { recentRefusalsOf, slotReturner, useCallerLimits } from './traffic/caller-limits.js';
import { createCallerLimiters } from './traffic/limiters.js';
import { useInFlight } from './traffic/in-flight.js';
import { LoadShedder, overloadReasons } from './traffic/load-shedder.js';

/** GraphiQL's title, and the front door's. */
const TITLE = 'Avatar Head gateway';

/** The part of the configuration the yoga app itself uses. */
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
  | 'operationLog'
  | 'production'
>;

interface GatewayOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  readonly settings: GatewaySettings;
  readonly metrics: GatewayMetrics;
  /** Whether the upstream answered recently; /ready reports it. */
  readonly ready: () => Promise<boolean>;
  /** Why /ready says "not ready" whatever the upstream answered (the breaker open). */
  readonly notReadyBecause?: () => string | undefined;
  /** Where automatic persisted queries are registered. @default in Redis with `redis`, else in this process's memory, bounded by the settings */
  readonly apqStore?: PersistedQueryStore;
  /** Redis (REDIS_URL) for the limit counters, APQ registrations and response cache shared by every process. @default none: process memory */
  readonly redis?: SharedRedis;
  /** The response cache's own Redis (RESPONSE_CACHE_REDIS_URL). @default `redis` */
  readonly cacheRedis?: SharedRedis;
  /** The operations' and the plans' spans; the upstream's attempts use the same. */
  readonly tracing: Tracing;
}

/** The yoga app. */
export type Gateway = YogaServerInstance<Record<string, unknown>, GatewayContext>;

/**
 * yoga logs every error that maskError replaced: the gateway's own faults at error; upstream
 * failures at warn (not a call an open breaker refused: its breaker's changes are logged) and a
 * caller's mistakes at debug, by code (the messages may quote a value).
 */
function logYogaError(logger: Logger, args: unknown[]): void {
  for (const arg of args) {
    const entry = errorLogEntry(arg);
    if (entry !== undefined) logger[entry.level](entry.fields, entry.message);
  }
}

/** One line per state change of an upstream breaker, naming it (the host's, or an operation's): opening at warn, the rest at info. */
function logCircuitChange(logger: Logger, circuit: CircuitName, state: CircuitStateName): void {
  const fields = circuit === 'host' ? { circuit, state } : { circuit: 'operation', operation: circuit, state };
  logger[state === 'open' ? 'warn' : 'info'](fields, state === 'open' ? 'upstream circuit breaker opened' : state === 'closed' ? 'upstream circuit breaker closed' : 'upstream circuit breaker half-open: one probe call let through');
}

/** The yoga app over an upstream, and the refusals its HTTP server answers before it; `buildGateway` makes both as the configuration says. */
function createGateway(options: GatewayOptions): { app: Gateway; handler: Handler; refuseEarly: EarlyRefusal; shedder: LoadShedder } {
  const { upstream, logger, settings, metrics, tracing } = options;
  const countRefusal = (limit: string) => metrics.refusals.inc({ limit });
  const refused = (limit: string) => () => countRefusal(limit);
  const planner = new Planner({ schema, strategy: settings.planner });
  const { persistedDocuments } = settings;
  const apqBounds = { maxEntries: persistedDocuments.apqMaxEntries, maxBytes: persistedDocuments.apqMaxBytes };
  const localApq = createMemoryQueryStore(apqBounds);
  const apqStore = options.apqStore ?? (options.redis ? createRedisQueryStore({ redis: options.redis, local: localApq, ttlSeconds: persistedDocuments.apqTtlSeconds, ...apqBounds }) : localApq);
  const limiters = createCallerLimiters(settings.callerLimits, { redis: options.redis, inFlightTtlSeconds: Math.ceil((2 * settings.operationTimeoutMs) / 1000) });
  const callerLimitOptions = { limiters, trustProxy: settings.callerLimits.trustProxy, onRefused: countRefusal };
  // Callers refused a moment ago: the caller limits remember them, the HTTP server refuses them again before yoga.
  const recent = recentRefusalsOf(callerLimitOptions);
  const callerLimits = useCallerLimits({ ...callerLimitOptions, recent });
  const overloaded = metrics.refusals.labels({ limit: 'overloaded' });
  const shedder = new LoadShedder(settings.loadShedding, {
    trustProxy: settings.callerLimits.trustProxy,
    queuedCalls: upstream.queuedCalls,
    onRefused: (reason) => {
      overloaded.inc();
      metrics.overloadRefusals.inc({ reason });
    },
  });
  metrics.watchLoad(shedder);
  // Every reason's series exists from the start (at 0), so a rate over it has a beginning.
  for (const reason of overloadReasons) metrics.overloadRefusals.inc({ reason }, 0);
  // An overloaded gateway refuses first: that refusal costs the least.
  const refuseEarly: EarlyRefusal = recent === undefined ? shedder.refuseEarly : (request) => shedder.refuseEarly(request) ?? recent.refuseEarly(request);
  // The same for every request: made once, not per request.
  const contextOptions: ContextOptions = {
    upstream,
    logger,
    fanout: settings.upstreamFanout,
    budget: settings.upstreamCallBudget,
    deadlineMs: settings.operationTimeoutMs,
    strategy: settings.planner,
  };
  const parseCache = boundedParseCache(settings.documentCache);
  metrics.watchDocumentCache('parsed', parseCache.use);
  const compiled = settings.compiledExecution
    ? compiledExecution(schema, { ...settings.compiledQueries, ...settings.compiledDocuments, onCompiledRun: () => metrics.compiledExecutions.inc(), watchCache: (use) => metrics.watchDocumentCache('compiled', use) })
    : undefined;
  const responseCache = settings.responseCache === undefined ? undefined : responseCachePlugin(settings.responseCache, schema, settings.operationTimeoutMs, metrics, options.cacheRedis ?? options.redis);
  // Records every operation: the pipeline's telemetry and the lane's.
  const recorder = new OperationRecorder({
    metrics,
    logger,
    log: settings.operationLog,
    tracing,
    clients: new ClientAwareness(settings.metricsClients),
    // The manifest's names and the operator's always apart; the others share the bounded pool.
    operationNames: new Set([...(persistedDocuments.trustedDocuments ? operationNamesOf(persistedDocuments.trustedDocuments) : []), ...settings.metricsOperations.known]),
    maxOperationNames: settings.metricsOperations.max,
  });
  // The page inlines every asset (no CDN): some 80 MB once loaded, so only when a browser asks.
  const graphiql = graphiQLPage(renderGraphiQLPage);
  // GraphiQL needs introspection, so it goes where introspection goes (off in production).
  const graphiqlOn = settings.introspection;

  // Shared by the pipeline and the lane's hot queries (lane.ts): the plan and budget, the answer's size limit, error masking.
  const admitPlan = planAdmission({ planner, budget: settings.upstreamCallBudget, maxItems: settings.maxResultItems, onRefused: countRefusal, tracing });
  const sizeLimit = { maxBytes: settings.maxResponseBytes, onRefused: refused('response_bytes'), onAbandoned: () => metrics.abandonedAnswers.inc() };
  const maskedErrors = { errorMessage: 'Unexpected error.', maskError: (error: unknown, message: string) => maskError(error, message) };

  /*
   * The pipeline, by the stage each plugin first acts in (request, request parsing, params, parse
   * and validate, execute, result, response), one entry per concern. Plugins' hooks of one kind run
   * in this order; the reason is beside each placement that matters. What they pass to each other
   * is on the request's and the operations' state (request-state.ts).
   */
  const pipeline: (Plugin | undefined)[] = [
    // — request —
    // First: every later hook finds the request's state (and in onParams each operation's).
    useRequestState(),
    // Then overload, before anything else: a request refused for it costs no more than its refusal
    // (as one the HTTP server refuses before yoga, counted in gateway_refusals_total only).
    useInFlight(shedder, slotReturner(limiters, recent)),
    // Pages for people (`/`, `/graphiql`) and the probes: answered before the telemetry counts an operation.
    useFrontDoor({ graphiql: graphiqlOn, title: TITLE }),
    useProbes({ ready: options.ready, notReadyBecause: options.notReadyBecause, metrics }),
    // Sees every GraphQL request that was not shed, before any other plugin may refuse it (its span says which did).
    useOperationTelemetry(recorder),
    // — request parsing —
    // Before the body is read: an answer the client cannot take is refused first. Its onExecute
    // (the document without @defer/@stream for a client that takes one JSON answer) comes before
    // the plan, compiled execution and the response cache, which all read the document.
    useContentNegotiation({ schema }),
    useRequestBody({ maxBytes: settings.limits.maxBodyBytes, onRefused: refused('body') }),
    // Before anything reads the variables (the response cache's key, the persisted documents).
    useStrictRequestParams({ maxVariablesDepth: settings.limits.maxVariablesDepth, onRefused: refused('variables_depth') }),
    useBatching({ maxBatch: settings.maxBatch, onRefused: refused('batch') }),
    // — params —
    // Before anything reads the query text: the response cache's key, the nesting check (an APQ hash alone has none yet).
    usePersistedDocuments({ apqStore, trustedDocuments: persistedDocuments.trustedDocuments, trustedDocumentsOnly: persistedDocuments.trustedDocumentsOnly }),
    // Its hit is set in onParams: the caller limits' admission, after it, replaces a hit with a refusal.
    // In onExecute it wraps the execute function, so compiled execution (which sets it) comes before it.
    compiled?.plugin,
    responseCache?.plugin,
    callerLimits.admission,
    // — parse and validate —
    // The nesting check before parsing (onParams), the token count while parsing, the rest as validation runs.
    useOperationLimits({ limits: settings.limits, introspection: settings.introspection, hideSuggestions: settings.production, csrfPrevention: settings.csrfPrevention, onRefused: countRefusal }),
    // The one detector of @defer/@stream, and their validation rules.
    useIncrementalDelivery(),
    // — execute —
    // The plan before the caller limits' charge, which reads its call count.
    useUpstreamPlan(admitPlan),
    callerLimits.charge,
    // A client that hangs up stops its operation: the executor checks the request's signal
    // between fields, and its answer is never serialised.
    useExecutionCancellation(),
    // — result —
    // After the response cache, whose copy of the answer it bounds.
    useResponseSizeLimit(sizeLimit),
    // After the response cache, which takes `extensions.http` out of the results it sees.
    useRetryAfter(),
    // — response —
    useAnswerHeaders({ cors: settings.corsOrigins.length > 0 }),
    useGraphiQLCache(graphiql),
  ];
  const yoga = createYoga<Record<string, unknown>, GatewayContext>({
    schema,
    graphqlEndpoint: '/graphql',
    context: (initial) => {
      const request = requestStateOf(initial);
      return createContext(initial.request, contextOptions, {
        requestId: request?.requestId ?? requestIdFrom(initial.request),
        batch: request?.batch,
        trace: operationStateOf(initial)?.record?.trace,
      });
    },
    plugins: pipeline.filter((plugin) => plugin !== undefined),
    parserAndValidationCache: parseCache.caches,
    // intake/batching.ts refuses larger batches first, with a code of ours.
    batching: { limit: settings.maxBatch },
    // No file uploads in the schema: a multipart/form-data request is HTTP 415, without a parser asked on every request.
    multipart: false,
    extraParamNames: persistedDocumentParams,
    cors: corsPolicy(settings.corsOrigins),
    // intake/body.ts caps bodies without piping every one through a counter.
    maxRequestBodySize: false,
    maskedErrors,
    logging: {
      // yoga logs at debug several times per request: build the line only when it is kept.
      debug: (...args) => {
        if (logger.isLevelEnabled('debug')) logger.debug(args.map(String).join(' '));
      },
      info: (...args) => logger.info(args.map(String).join(' ')),
      warn: (...args) => logger.warn(args.map(String).join(' ')),
      error: (...args) => logYogaError(logger, args),
    },
    graphiql: graphiqlOn && { title: TITLE, defaultQuery: defaultGraphiQLQuery, isHeadersEditorEnabled: true, defaultEditorToolsVisibility: 'headers' },
    renderGraphiQL: graphiql.render,
    // pages/front-door.ts answers `/`; yoga's landing page would name yoga on every unknown path.
    landingPage: false,
  });
  // Hot queries before yoga (lane.ts), by their compiled code on a context of their own, after the
  // same plan; not with a response cache, whose misses and stores are the pipeline's.
  const hot: HotQueries | undefined =
    compiled === undefined || responseCache !== undefined
      ? undefined
      : {
          prepare: (document, params) => {
            const query = compiled.hot(document, params.operationName, params.variables);
            if (query === undefined) return undefined;
            return (request) => {
              const context = createContext(request, contextOptions, { requestId: request.requestId, batch: undefined, trace: request.trace });
              const refusal = admitPlan(context, { document, operationName: params.operationName, variables: params.variables }, undefined);
              return { context, result: refusal === undefined ? query(context) : { errors: [refusal] } };
            };
          },
          // As yoga's masking does: the original of each error masked is logged.
          mask: (error) => {
            const masked = maskedErrors.maskError(error, maskedErrors.errorMessage);
            if (masked !== error) logYogaError(logger, [error]);
            return masked as GraphQLError;
          },
          respond: (result, mediaType) => processRegularResult(withRetryAfter(result), yoga.fetchAPI, mediaType) as Response,
          maxResponseBytes: sizeLimit.maxBytes,
          onRefused: sizeLimit.onRefused,
          onAbandoned: sizeLimit.onAbandoned,
          onAnswered: () => metrics.compiledAnswersEarly.inc(),
        };
  const kept = responseCache?.inMemory === true ? { cache: responseCache.cache, onAnswered: () => metrics.cachedAnswersEarly.inc() } : undefined;
  // The lane takes nothing with a caller limit (its admission and charge are the pipeline's), nor
  // with trusted documents only (a query text is refused there, even one whose answer is kept).
  const laneOn = (kept !== undefined || hot !== undefined) && callerLimits.admission === undefined && callerLimits.charge === undefined && !persistedDocuments.trustedDocumentsOnly;
  const handler: Handler = !laneOn
    ? yoga
    : withLane(yoga, {
        endpoint: yoga.graphqlEndpoint,
        parsed: (text) => parseCache.caches.documentCache.get(text),
        recorder,
        shedder,
        maxBodyBytes: settings.limits.maxBodyBytes,
        maxVariablesDepth: settings.limits.maxVariablesDepth,
        cors: settings.corsOrigins.length > 0,
        ...(kept === undefined ? {} : { kept }),
        ...(hot === undefined ? {} : { hot }),
      });
  return { app: yoga, handler, refuseEarly, shedder };
}

/** The upstream options an operator configured, for the upstream at `baseUrl`. */
function upstreamOptionsFrom(config: Config, baseUrl: string): Omit<UpstreamOptions, 'tracing'> {
  return {
    baseUrl,
    routes: config.routes,
    timeoutMs: config.upstreamTimeoutMs,
    connections: config.upstreamConnections,
    keepAliveTimeoutMs: config.upstreamKeepAliveMs,
    maxResponseBytes: config.upstreamMaxResponseBytes,
    breaker: config.resilience.breaker,
    retryBudget: config.resilience.retryBudget,
    dedupe: config.resilience.dedupe,
  };
}

export interface BuildGatewayOptions {
  readonly logger: Logger;
  readonly metrics: GatewayMetrics;
  /** Sees every upstream call attempt, retries included, after the metrics have. */
  readonly onAttempt?: (attempt: UpstreamAttempt) => void;
  /** The Redis connection (REDIS_URL) the limits and APQ share, if any. */
  readonly redis?: SharedRedis | undefined;
  /** The response cache's own Redis connection (RESPONSE_CACHE_REDIS_URL), if any; else it uses `redis`. */
  readonly cacheRedis?: SharedRedis | undefined;
}

export interface BuiltGateway {
  /** The yoga app: tests drive it with `fetch`. */
  readonly app: Gateway;
  /** What an HTTP server serves (`main.ts` on its port): the yoga app, behind the lane when it is on (lane.ts). */
  readonly handler: Handler;
  /** What the HTTP server refuses before yoga: new operations while overloaded, callers refused a moment ago. */
  readonly refuseEarly: EarlyRefusal;
  /** Its load shedding: closed (its event-loop timer stopped) by whoever stops the gateway. */
  readonly shedder: LoadShedder;
  /** Its upstream pool, closed by whoever stops the gateway. */
  readonly upstream: Upstream;
  /** Its spans: shut down (the last batch exported) by whoever stops the gateway. */
  readonly tracing: Tracing;
  /** Its readiness check, cached: `/ready` on the public port and on ADMIN_PORT share it. */
  readonly ready: () => Promise<boolean>;
  /** Why it is not ready whatever the upstream answered: `shutting down` once it left the rotation, `upstream unreachable` while the host's breaker refuses calls, `circuit open` while every operation's does. */
  readonly notReadyBecause: () => string | undefined;
  /** From now on `/ready` answers 503 (`shutting down`): the first step of a stop, while both ports still serve. */
  readonly leaveRotation: () => void;
}

/** /ready's reason once the process is stopping. */
const SHUTTING_DOWN = 'shutting down';
/** /ready's reason while the host's breaker refuses every call (failed connections). */
const UPSTREAM_UNREACHABLE = 'upstream unreachable';

/**
 * The gateway as an operator configured it, on the upstream at `upstreamUrl`: its tracing, the
 * upstream pool and its retry policy, the readiness probe and the yoga app. The one way to build
 * it: `main.ts` and the tests both come through here, so a test meets what production runs.
 */
export function buildGateway(config: Config, upstreamUrl: string, options: BuildGatewayOptions): BuiltGateway {
  const { logger, metrics, onAttempt } = options;
  const tracing = createTracing(config.tracing);
  const upstream = createUpstream({
    ...upstreamOptionsFrom(config, upstreamUrl),
    tracing,
    onAttempt:
      onAttempt === undefined
        ? metrics.recordAttempt
        : (attempt) => {
            metrics.recordAttempt(attempt);
            onAttempt(attempt);
          },
    circuitEvents: {
      onChange: (circuit, state) => {
        metrics.recordCircuitState(circuit, state);
        logCircuitChange(logger, circuit, state);
      },
      onRefused: metrics.recordCircuitRefusal,
    },
    onJoined: () => metrics.upstreamCallsJoined.inc(),
    onRetryRefused: () => metrics.upstreamRetriesRefused.inc(),
  });
  const ready = createReadiness({ check: upstreamAnswers(upstream) });
  // Not ready while the breakers refuse every call: the host's, or every operation's (one failing
  // operation leaves the others served). Once a probe is due, the readiness check's own probe
  // decides again (a replica out of rotation gets no call that could close its breaker).
  let leaving = false;
  const notReadyBecause = () => {
    if (leaving) return SHUTTING_DOWN;
    const refusing = upstream.circuits?.refusingAll();
    return refusing === 'host' ? UPSTREAM_UNREACHABLE : refusing === 'operations' ? CIRCUIT_OPEN : undefined;
  };
  const { app, handler, refuseEarly, shedder } = createGateway({ upstream, logger, settings: config, metrics, ready, notReadyBecause, tracing, ...(options.redis ? { redis: options.redis } : {}), ...(options.cacheRedis ? { cacheRedis: options.cacheRedis } : {}) });
  return { app, handler, refuseEarly, shedder, upstream, tracing, ready, notReadyBecause, leaveRotation: () => void (leaving = true) };
}
