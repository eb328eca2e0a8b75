import type { GraphQLSchema } from 'graphql';
import { Planner } from '../plan/operation-plan.js';
import type { HeadChangeSource } from '../schema/context.js';
import { useIncrementalDelivery } from './answers/negotiation.js';
import { compiledExecution } from './documents/compiled-execution.js';
import { useCoordinateUsage } from './documents/coordinate-usage.js';
import { gatewayEnvelop } from './documents/execution.js';
import { incrementalDeliveryRules } from './documents/incremental-delivery.js';
import { preparedDocuments } from './documents/prepared.js';
import { planAdmission, useUpstreamPlan } from './documents/upstream-plan.js';
import { fragmentPairsLimit } from './guards/fragment-pairs.js';
import { documentPolicies } from './guards/operation-limits.js';
import type { PolicyOptions } from './policy-options.js';
import type { GatewayCache } from './response-cache/cache.js';
import { responseCachePlugin } from './response-cache/plugin.js';

/** What every schema's policies share, made once by policies.ts. */
export interface SharedParts {
  /** Where subscriptions listen for head changes (the plan's context hands it on). */
  readonly headChanges: HeadChangeSource;
  readonly countRefusal: (limit: string) => void;
  /** The response cache's one store (`responseCacheOf`), where RESPONSE_CACHE_TTL_MS turns it on. */
  readonly cache: GatewayCache | undefined;
}

/** Execution's engine (compiled or interpreted), in the envelop that runs the document policies and the cache's. */
function execution(
  options: PolicyOptions,
  schema: GraphQLSchema,
  responseCache: ReturnType<typeof responseCachePlugin> | undefined,
) {
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

/** The plan stage's policy: each operation planned, admitted within the call budget and items limit, run upstream. */
function upstreamPlan(options: PolicyOptions, schema: GraphQLSchema, shared: SharedParts) {
  const { settings } = options;
  return useUpstreamPlan(
    planAdmission({
      planner: new Planner({ schema, strategy: settings.planner }),
      budget: settings.upstreamCallBudget,
      maxItems: settings.maxResultItems,
      onRefused: shared.countRefusal,
      tracing: options.tracing,
    }),
    {
      upstream: options.upstream,
      logger: options.logger,
      fanout: settings.upstreamFanout,
      budget: settings.upstreamCallBudget,
      deadlineMs: settings.operationTimeoutMs,
      strategy: settings.planner,
      headChanges: shared.headChanges,
    },
  );
}

/**
 * The policies that read the schema an endpoint serves, made once per schema (`/graphql`'s, SUBGRAPH_PATH's;
 * policies.ts makes the others once, for both), and the engine whose envelop runs the response cache's plugins.
 */
export function schemaPolicies(options: PolicyOptions, schema: GraphQLSchema, shared: SharedParts) {
  const { settings, metrics } = options;
  const { countRefusal } = shared;
  const responseCache =
    settings.responseCache === undefined || shared.cache === undefined
      ? undefined
      : responseCachePlugin(settings.responseCache, schema, shared.cache);
  const engine = execution(options, schema, responseCache);
  const documents = preparedDocuments({
    envelop: engine.getEnveloped,
    bounds: settings.documentCache,
    maxDepth: settings.limits.maxDepth,
    onRefused: countRefusal,
    budget: fragmentPairsLimit({ max: settings.limits.maxFragmentPairs, onRefused: () => countRefusal('fragments') }),
  });
  metrics.watchDocumentCache('parsed', documents.use);
  return {
    engine,
    policies: {
      documents,
      coordinateUsage: settings.schemaUsage
        ? useCoordinateUsage({ schema, metrics: metrics.schemaUsage, logger: options.logger })
        : undefined,
      incrementalDelivery: useIncrementalDelivery({ schema }),
      responseCache,
      upstreamPlan: upstreamPlan(options, schema, shared),
      execution: engine.policy,
    },
  };
}
