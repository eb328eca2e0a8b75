import { GraphQLError } from 'graphql';
import { createYoga, type CORSOptions, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { createContext, type GatewayContext } from './context.js';
import type { GatewayMetrics } from './metrics.js';
import { createMemoryQueryStore, type PersistedQueryStore } from './persisted-query-store.js';
import { useBatching } from './plugins/batching.js';
import { useCompiledExecution } from './plugins/compiled-execution.js';
import { useIncrementalDelivery } from './plugins/defer-stream.js';
import { useGraphiQLCache } from './plugins/graphiql-cache.js';
import { useOperability } from './plugins/operability.js';
import { useOperationLimits } from './plugins/operation-limits.js';
import { persistedDocumentParams, usePersistedDocuments } from './plugins/persisted-documents.js';
import { useRequestDecompression, useRequestSizeLimit } from './plugins/request-size-limit.js';
import { useUpstreamPlan } from './plugins/upstream-plan.js';
import { Planner } from './plan/operation-plan.js';
import { createReadiness, upstreamAnswers } from './readiness.js';
import { maskError } from './schema/errors.js';
import { schema } from './schema/index.js';
import { UpstreamError } from './upstream/errors.js';
import type { UpstreamAttempt } from './upstream/transport.js';
import { createUpstream, upstreamOptionsFrom, type Upstream } from './upstream/upstream.js';

export const defaultGraphiQLQuery = `# A head and its hair in one round trip.
# Fields marked "Needs a bearer token" (permissions, deleteHead) want an
# Authorization header: run the login mutation, then add
#   {"Authorization": "Bearer <accessToken>"}
# in the Headers pane below.
query HeadsWithHair {
  heads(first: 3) {
    totalCount
    nodes {
      id
      name
      url
      createdAt
      hair {
        name
        url
        style
        gender
      }
    }
  }
}
`;

/**
 * When a query is compiled: once it ran twice (a one-off document never pays for a compilation),
 * and only up to 200 field selections (compiling a thousand takes tens of milliseconds).
 */
const COMPILED_EXECUTION = { afterExecutions: 2, maxFields: 200 } as const;

/** The part of the configuration the yoga app itself uses. */
export type GatewaySettings = Pick<
  Config,
  | 'upstreamFanout'
  | 'upstreamCallBudget'
  | 'operationTimeoutMs'
  | 'introspection'
  | 'planner'
  | 'compiledExecution'
  | 'corsOrigins'
  | 'limits'
  | 'maxBatch'
  | 'persistedDocuments'
  | 'production'
>;

interface GatewayOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  readonly settings: GatewaySettings;
  readonly metrics: GatewayMetrics;
  /** Whether the upstream answered recently; /ready reports it. */
  readonly ready: () => Promise<boolean>;
  /** Where automatic persisted queries are registered. @default in this process's memory, bounded by the settings */
  readonly apqStore?: PersistedQueryStore;
}

export type Gateway = YogaServerInstance<Record<string, unknown>, GatewayContext>;

/**
 * yoga logs every error a resolver threw that was not a GraphQLError. Upstream errors are
 * expected and already mapped for the client: the upstream's own failures are worth a warning,
 * a caller's mistakes or a client that went away are not worth more than debug.
 */
function logYogaError(logger: Logger, args: unknown[]): void {
  const upstream = args
    .map((a) => (a instanceof GraphQLError ? a.originalError : a))
    .find((a): a is UpstreamError => a instanceof UpstreamError);
  const line = args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ');
  if (upstream === undefined) logger.error(line);
  else if (upstream.code.startsWith('UPSTREAM_')) logger.warn({ code: upstream.code, operation: upstream.operation }, line);
  else logger.debug({ code: upstream.code, operation: upstream.operation }, line);
}

/**
 * Same-origin only unless CORS_ORIGINS lists the browser apps allowed to call us. A request from
 * an origin not listed gets no CORS headers at all (naming another origin would leak the list).
 */
function corsPolicy(origins: readonly string[]): ((request: Request) => CORSOptions | false) | false {
  if (origins.length === 0) return false;
  const anyOrigin = origins.includes('*');
  return (request: Request) => {
    const origin = request.headers.get('origin');
    if (origin === null || !(anyOrigin || origins.includes(origin))) return false;
    // Credentials (the Authorization header) only for origins named explicitly, never for `*`.
    return { origin, credentials: !anyOrigin, methods: ['GET', 'POST'], exposedHeaders: ['x-request-id'] };
  };
}

/** The yoga app over an upstream; `buildGateway` makes both as the configuration says. */
function createGateway(options: GatewayOptions): Gateway {
  const { upstream, logger, settings, metrics } = options;
  const refused = (limit: string) => () => metrics.refusals.inc({ limit });
  const planner = new Planner({ schema, strategy: settings.planner });
  const { persistedDocuments } = settings;
  const apqStore = options.apqStore ?? createMemoryQueryStore({ maxEntries: persistedDocuments.apqMaxEntries, maxBytes: persistedDocuments.apqMaxBytes });
  // The page inlines every asset (no CDN): some 80 MB once loaded, so only when a browser asks.
  const graphiql = useGraphiQLCache(async (graphiqlOptions) => (await import('@graphql-yoga/render-graphiql')).renderGraphiQL(graphiqlOptions));
  return createYoga<Record<string, unknown>, GatewayContext>({
    schema,
    graphqlEndpoint: '/graphql',
    context: ({ request }) =>
      createContext(request, {
        upstream,
        logger,
        fanout: settings.upstreamFanout,
        budget: settings.upstreamCallBudget,
        deadlineMs: settings.operationTimeoutMs,
        strategy: settings.planner,
      }),
    plugins: [
      useRequestDecompression(),
      useRequestSizeLimit({ maxBytes: settings.limits.maxBodyBytes, onRefused: refused('body') }),
      useBatching({ maxBatch: settings.maxBatch, onRefused: refused('batch') }),
      ...usePersistedDocuments({ apqStore, trustedDocuments: persistedDocuments.trustedDocuments, trustedDocumentsOnly: persistedDocuments.trustedDocumentsOnly }),
      ...useOperationLimits({
        limits: settings.limits,
        introspection: settings.introspection,
        hideSuggestions: settings.production,
        onRefused: (limit) => metrics.refusals.inc({ limit }),
      }),
      ...useIncrementalDelivery(),
      useUpstreamPlan({ planner, budget: settings.upstreamCallBudget, onRefused: refused('budget') }),
      useOperability({ metrics, logger, ready: options.ready }),
      ...(settings.compiledExecution ? [useCompiledExecution(COMPILED_EXECUTION)] : []),
      graphiql.plugin,
    ] as Plugin[],
    // plugins/batching.ts refuses larger batches first, with a code of ours.
    batching: { limit: settings.maxBatch },
    extraParamNames: persistedDocumentParams,
    cors: corsPolicy(settings.corsOrigins),
    // plugins/request-size-limit.ts caps bodies without piping every one through a counter.
    maxRequestBodySize: false,
    maskedErrors: { maskError: (error, message) => maskError(error, message) },
    logging: {
      // yoga logs at debug several times per request: build the line only when it is kept.
      debug: (...args) => {
        if (logger.isLevelEnabled('debug')) logger.debug(args.map(String).join(' '));
      },
      info: (...args) => logger.info(args.map(String).join(' ')),
      warn: (...args) => logger.warn(args.map(String).join(' ')),
      error: (...args) => logYogaError(logger, args),
    },
    // GraphiQL needs introspection, so it goes where introspection goes (off in production).
    graphiql: settings.introspection && { title: 'Avatar Head gateway', defaultQuery: defaultGraphiQLQuery, isHeadersEditorEnabled: true, defaultEditorToolsVisibility: 'headers' },
    renderGraphiQL: graphiql.renderGraphiQL,
    landingPage: false,
  });
}

export interface BuildGatewayOptions {
  readonly logger: Logger;
  readonly metrics: GatewayMetrics;
  /** Sees every upstream call attempt, retries included, after the metrics have. */
  readonly onAttempt?: (attempt: UpstreamAttempt) => void;
}

export interface BuiltGateway {
  /** The yoga app: `main.ts` serves it on a port, tests drive it with `fetch`. */
  readonly app: Gateway;
  /** Its upstream pool, closed by whoever stops the gateway. */
  readonly upstream: Upstream;
}

/**
 * The gateway as an operator configured it, on the upstream at `upstreamUrl`: the upstream pool
 * and its retry policy, the readiness probe and the yoga app. The one way to build it: `main.ts`
 * and the tests both come through here, so a test meets what production runs.
 */
export function buildGateway(config: Config, upstreamUrl: string, options: BuildGatewayOptions): BuiltGateway {
  const { logger, metrics, onAttempt } = options;
  const upstream = createUpstream({
    ...upstreamOptionsFrom(config, upstreamUrl),
    onAttempt:
      onAttempt === undefined
        ? metrics.recordAttempt
        : (attempt) => {
            metrics.recordAttempt(attempt);
            onAttempt(attempt);
          },
  });
  const ready = createReadiness({ check: upstreamAnswers(upstream) });
  return { app: createGateway({ upstream, logger, settings: config, metrics, ready }), upstream };
}
