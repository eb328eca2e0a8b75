import type { Config } from '../config.js';
import { createTracing, type Tracing } from '../telemetry/tracing.js';
import { CIRCUIT_OPEN } from '../upstream/errors.js';
import type { Upstream } from '../upstream/upstream.js';
import { trustingProxies } from './callers.js';
import { instrumentedUpstream, type UpstreamWatchers } from './gateway-upstream.js';
import { frontDoor, isBrowserPageView } from './pages/front-door.js';
import { graphiQLPage } from './pages/graphiql-cache.js';
import { defaultGraphiQLQuery, renderGraphiQLPage } from './pages/graphiql-page.js';
import { Pipeline } from './pipeline/pipeline.js';
import type { Policy, Serve } from './pipeline/stages.js';
import { gatewayPolicies } from './policies.js';
import type { PolicyOptions } from './policy-options.js';
import { createReadiness, upstreamAnswers } from './probes/readiness.js';
import { probes } from './probes/routes.js';
import type { HeadEvents } from './real-time/head-events.js';
import type { Subscriptions } from './real-time/subscriptions.js';
import { routes } from './routes.js';
import { redisEventTarget } from './shared-state/redis-events.js';
import { type StatusPage, statusPage } from './status/page.js';
import { KnownTokens } from './traffic/known-tokens.js';
import type { LoadShedder } from './traffic/load-shedder.js';
import { fetchTransport } from './transports/fetch.js';
import { type Handler, nodeTransport } from './transports/node.js';
import { type WebSocketTransport, websocketTransport } from './transports/websocket.js';

const TITLE = 'Avatar Head gateway';
const ENDPOINT = '/graphql';

/** The gateway as tests and the in-process bench drive it: the fetch transport. */
export interface Gateway {
  fetch: ReturnType<typeof fetchTransport>;
}

interface GatewayOptions extends PolicyOptions {
  /** The tokens known to be real: a caller of their own (callers.ts). */
  readonly knownTokens: KnownTokens;
  /** Whether the upstream answered recently; /ready reports it. */
  readonly ready: () => Promise<boolean>;
  /** Why /ready says "not ready" whatever the upstream answered (the breaker open). */
  readonly notReadyBecause?: () => string | undefined;
  /** The status page, where STATUS_PAGE_PUBLIC serves it on the public port too. */
  readonly publicStatus?: StatusPage | undefined;
}

type Parts = ReturnType<typeof gatewayPolicies>;
/** The policies made for the schema an endpoint serves (policies.ts's `schemaPolicies`). */
type SchemaParts = NonNullable<Parts['subgraph']>;

/**
 * The gateway's policies, in the order their steps run in every stage they take part in (one that is off is left out):
 * the pipeline derives each stage from this list. Where a policy's place matters, the reason is beside it.
 */
function inOrder(parts: Parts, endpoint: SchemaParts = parts): Policy[] {
  const policies: (Policy | undefined)[] = [
    // answer: first, it makes the answer (status, type, body) on which every later step writes headers.
    parts.answerBody,
    // intake and document: first, so a request or an operation refused for overload costs no more than its refusal.
    parts.inFlight,
    parts.eventsInFlight,
    // document: the span times the rest of it. record: once the results are out.
    parts.telemetry,
    // intake: what refuses on the head alone, before a byte of the body is read.
    parts.contentNegotiation,
    // plan: the plan is made before the caller limits charge its upstream calls.
    endpoint.upstreamPlan,
    // intake: a caller refused a moment ago, before its body is read. admission: before a kept answer (a refusal
    // replaces it).
    parts.callerLimits,
    // admission: a login's account and address windows, before its upstream call.
    parts.loginLimits,
    parts.body,
    parts.csrf,
    parts.method,
    parts.params,
    parts.batching,
    // document: before anything reads the variables.
    parts.variablesDepth,
    // result: the suggestions cut before the masking, which rewrites a refused variable's error from what they leave;
    // then every later step, and the record, reads the errors clients read.
    parts.hiddenSuggestions,
    parts.masking,
    // document: before anything reads the query text (APQ and trusted documents name it). admission: a registration
    // written once its document validated and it was admitted. result: the answer waits for the write.
    parts.persisted,
    parts.paramsCheck,
    // document: parsed, the request's validation budget spent, validated: once per text (the prepared document).
    endpoint.documents,
    // document: once valid, the coordinates it selects counted by client (refused later or not).
    endpoint.coordinateUsage,
    // document: once valid, what its transport carries decides @defer/@stream and streams. result: parts in the format
    // asked.
    endpoint.incrementalDelivery,
    // execution: a subscription or live query runs as a stream, before the engine would run it as a query (/graphql's).
    endpoint === parts ? parts.subscriptions.policy : undefined,
    // admission: the last (after the caller limits). result: keeps the masked result; its evictions read by the head
    // events. answer: a revalidation's 304 on the body made.
    endpoint.responseCache,
    // result: a mutation's heads told to their watchers, by the outcome the cache's evictions read.
    parts.headEvents.policy,
    parts.retryAfter,
    // execution: the last, the engine runs what no policy before it took.
    endpoint.execution,
    // answer: what every answer carries, the routes' too.
    parts.cors,
    parts.cacheHeaders,
  ];
  return policies.filter((policy) => policy !== undefined);
}

/** The gateway over an upstream, on every transport; `buildGateway` makes it as the configuration says. */
function createGateway(
  options: GatewayOptions,
): Pick<BuiltGateway, 'app' | 'handler' | 'websocket' | 'shedder' | 'pipeline' | 'headEvents' | 'subscriptions'> {
  const { settings } = options;
  const parts = gatewayPolicies(options);
  const pipeline = new Pipeline({ policies: inOrder(parts), mask: parts.masking.mask });
  // SUBGRAPH_PATH: the same stages, with the subgraph schema's documents, plan and engine.
  const subgraph =
    parts.subgraph === undefined || settings.subgraphPath === undefined
      ? undefined
      : {
          path: settings.subgraphPath,
          pipeline: new Pipeline({ policies: inOrder(parts, parts.subgraph), mask: parts.masking.mask }),
        };
  const callers = {
    trustProxy: trustingProxies(settings.callerLimits.trustProxy),
    callerOf: options.knownTokens.callerOf,
  };
  // GraphiQL needs introspection, so it goes where introspection goes (off in production).
  const graphiql = settings.introspection
    ? graphiQLPage(renderGraphiQLPage, {
        title: TITLE,
        defaultQuery: defaultGraphiQLQuery,
        isHeadersEditorEnabled: true,
        defaultEditorToolsVisibility: 'headers',
      })
    : undefined;
  const serve: Serve = routes({
    endpoint: ENDPOINT,
    pipeline,
    subgraph,
    callers,
    graphiql:
      graphiql === undefined ? undefined : (request) => (isBrowserPageView(request) ? graphiql(request) : undefined),
    preflight: parts.cors?.preflight,
    routes: [
      frontDoor({ graphiql: graphiql !== undefined, title: TITLE, endpoint: ENDPOINT }),
      probes(
        { ready: options.ready, notReadyBecause: options.notReadyBecause, metrics: options.metrics },
        options.publicStatus,
      ),
    ],
    everyAnswer: [parts.cors?.answer, parts.cacheHeaders.answer].filter((step) => step !== undefined),
  });
  parts.subscriptions.enterThrough(pipeline);
  const websocket = websocketTransport(pipeline, {
    callers,
    endpoint: ENDPOINT,
    maxMessageBytes: settings.limits.maxBodyBytes,
    heartbeatMs: settings.subscriptions.heartbeatMs,
    logger: options.logger,
    ...settings.websocket,
  });
  return {
    app: { fetch: fetchTransport(serve) },
    handler: nodeTransport(serve),
    websocket,
    shedder: parts.shedder,
    pipeline,
    headEvents: parts.headEvents,
    subscriptions: parts.subscriptions,
  };
}

export interface BuildGatewayOptions
  extends UpstreamWatchers,
    Pick<PolicyOptions, 'redis' | 'cacheRedis' | 'clusterWorker'> {}

export interface BuiltGateway {
  /** The gateway on the fetch transport: tests drive it with `fetch`. */
  readonly app: Gateway;
  /** The gateway on the HTTP transport: what an HTTP server serves (`main.ts` on its port). */
  readonly handler: Handler;
  /** The gateway on WebSocket (graphql-transport-ws): attached to that server's upgrades, closed (1001) on stop. */
  readonly websocket: WebSocketTransport;
  /** The one path of its GraphQL requests: its stages' steps by name (`pipeline.stages`). */
  readonly pipeline: Pipeline;
  /** Its load shedding: closed (its event-loop timer stopped) on stop. */
  readonly shedder: LoadShedder;
  /** The heads writes may have changed, told to their watchers (closed on stop, before Redis). */
  readonly headEvents: HeadEvents;
  /** The tokens known to be real (closed on stop, before Redis). */
  readonly knownTokens: KnownTokens;
  /** Its open subscriptions: completed on stop, once it is out of rotation. */
  readonly subscriptions: Subscriptions;
  /** Its upstream pool, closed on stop. */
  readonly upstream: Upstream;
  /** Its spans: shut down (the last batch exported) on stop. */
  readonly tracing: Tracing;
  /** Its readiness check, cached: `/ready` on the public port and on ADMIN_PORT share it. */
  readonly ready: () => Promise<boolean>;
  /** Why it is not ready whatever the upstream answered: shutting down, or the breakers refusing every call. */
  readonly notReadyBecause: () => string | undefined;
  /** From now on `/ready` answers 503 (`shutting down`): the first step of a stop, while both ports still serve. */
  readonly leaveRotation: () => void;
  /** Its status page (STATUS_PAGE): its sampler stopped on stop. */
  readonly status: StatusPage | undefined;
}

/**
 * The gateway as an operator configured it, on the upstream at `upstreamUrl`: its tracing, upstream pool, readiness
 * probe and policies. The one way to build it: `main.ts` and the tests both come here, so a test meets production.
 */
export function buildGateway(config: Config, upstreamUrl: string, options: BuildGatewayOptions): BuiltGateway {
  const { metrics, redis } = options;
  const tracing = createTracing(config.tracing);
  // Learnt from the upstream's answers (a token it accepted, one login issued); with REDIS_URL told to every replica.
  const knownTokens = new KnownTokens(
    config.knownTokens,
    redis === undefined
      ? undefined
      : {
          channel: redisEventTarget({ publisher: redis.client, subscriber: redis.subscriber(), prefix: 'gw:known:' }),
          redis,
        },
  );
  metrics.watchKnownTokens(() => knownTokens.size);
  const upstream = instrumentedUpstream(config, upstreamUrl, options, tracing, knownTokens);
  const ready = createReadiness({ check: upstreamAnswers(upstream) });
  metrics.watchReadiness(() => notReadyBecause() === undefined && ready.last() !== false);
  metrics.watchUpstreamAnswers(ready.last);
  // Not ready while the breakers refuse every call: the host's, or every operation's (one failing leaves the others
  // served). Once a probe is due the readiness check's own probe decides (out of rotation, no call could close one).
  let leaving = false;
  const notReadyBecause = () => {
    if (leaving) return 'shutting down';
    const refusing = upstream.circuits?.refusingAll();
    return refusing === 'host' ? 'upstream unreachable' : refusing === 'operations' ? CIRCUIT_OPEN : undefined;
  };
  // Sampled only where someone can see it: on ADMIN_PORT, or on the public port.
  const served = config.connections.adminPort !== undefined || config.statusPage.public;
  const status = statusPage(
    { on: config.statusPage.on && served },
    { ...options, ready, notReadyBecause, shedder: () => gateway.shedder },
  );
  const gateway = createGateway({
    ...options,
    upstream,
    settings: config,
    ready,
    notReadyBecause,
    tracing,
    knownTokens,
    publicStatus: config.statusPage.public ? status : undefined,
  });
  return {
    ...gateway,
    knownTokens,
    upstream,
    tracing,
    ready,
    notReadyBecause,
    leaveRotation: () => {
      leaving = true;
    },
    status,
  };
}
