import { isObjectType } from 'graphql';
import {
  ADMIN_MAX_CONNECTIONS,
  descriptorLimit,
  descriptorsForClients,
  RESERVED_DESCRIPTORS,
} from './config/descriptors.js';
import { type Environment, environment } from './config/environment.js';
import { type PlacedSettings, placedSettings } from './config/places.js';
import { loadTrustedDocuments, type TrustedDocuments, TrustedDocumentsError } from './config/trusted-documents.js';
import type { Strategy } from './domain/needs.js';
import { schema } from './schema/index.js';
import type { TracingSettings } from './telemetry/tracing.js';
import type { CircuitSettings } from './upstream/circuit.js';
import type { RetryBudgetSettings } from './upstream/retry-budget.js';
import { loadRouteTable, RouteConfigError, type RouteTable } from './upstream/routes.js';

export type { TrustedDocuments } from './config/trusted-documents.js';
export type { RedisCredentials, RedisNode, RedisTopology } from './config/values.js';

/**
 * What the gateway runs with, read once from the environment and handed down, grouped as the
 * server needs it: the layers below take their part as options. Its type is what `settingsFrom`
 * makes of the parsed environment (config/environment.ts: every variable once, with its default,
 * its range, what it does and, for a setting as parsed, its place in these groups), not a second
 * list kept by hand.
 */
export type Config = ReturnType<typeof settingsFrom>;

/**
 * The upstream's breaker, its retry budget and shared calls: CIRCUIT_BREAKER_*, UPSTREAM_RETRY_BUDGET_*,
 * UPSTREAM_DEDUPE.
 */
export type ResilienceSettings = Config['resilience'];
/** How a process stops on SIGTERM: out of rotation first (SHUTDOWN_DELAY_MS), then drained (SHUTDOWN_GRACE_MS). */
export type ShutdownSettings = Config['shutdown'];
/** Where the shared state lives: REDIS_URL's topology, and the Sentinels' own password. */
export type SharedStateSettings = NonNullable<Config['redis']>;
/** Client connections: how long a request may take to arrive, how many may be open, the admin port. */
export type ConnectionSettings = Config['connections'];
/**
 * A cache of something derived from each distinct document, the least recently used dropped first (its entries, and the
 * heap bytes they may hold together).
 */
export type CacheBounds = Config['documentCache'];
/** Which queries graphql-jit compiles (server/documents/compiled-execution.ts). */
export type CompiledQueryThresholds = Config['compiledQueries'];
/**
 * Per-operation limits refused before execution (GraphQL Armor and the body cap): MAX_DEPTH, MAX_ALIASES and the rest.
 */
export type OperationLimits = Config['limits'];
/** The client names and versions /metrics keeps apart, the first seen (server/instruments/client-awareness.ts). */
export type ClientMetricsBounds = Config['metricsClients'];
/**
 * Per-caller limits, the RATE_LIMIT_* variables (undefined: off). A caller is its bearer token, hashed, or its client
 * address.
 */
export type CallerLimitSettings = Config['callerLimits'];
/** When the gateway refuses new operations for overload (server/traffic/load-shedder.ts). */
export type LoadSheddingSettings = Config['loadShedding'];
/** Documents a client may name by hash instead of sending their text. */
export type PersistedDocumentsSettings = Config['persistedDocuments'];
/** Which operations get a `graphql operation` log line (telemetry/operation-telemetry.ts). */
export type OperationLogSettings = Config['operationLog'];
/** The response cache (server/response-cache/), on when RESPONSE_CACHE_TTL_MS is more than 0. */
export type ResponseCacheSettings = NonNullable<Config['responseCache']>;

/** A configuration problem, worded for one line on stderr: `VARIABLE: expected ...`. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment once; empty strings count as unset so `PORT=` falls back to the default. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parsed = environment.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0]);
    // A Redis URL may carry a password: not echoed.
    const got =
      variable === 'REDIS_URL' || variable === 'REDIS_SENTINEL_PASSWORD'
        ? 'something else'
        : JSON.stringify(env[variable]);
    throw new ConfigError(`${variable}: expected ${issue.message}, got ${got}`);
  }
  const e = parsed.data;
  let routes: RouteTable;
  try {
    routes = loadRouteTable(e.UPSTREAM_ROUTES_FILE);
  } catch (error) {
    if (error instanceof RouteConfigError) throw new ConfigError(`UPSTREAM_ROUTES_FILE: ${error.message}`);
    throw error;
  }
  if (e.OPERATION_TIMEOUT_MS <= e.UPSTREAM_TIMEOUT_MS) {
    throw new ConfigError(
      `OPERATION_TIMEOUT_MS: expected more than UPSTREAM_TIMEOUT_MS (${e.UPSTREAM_TIMEOUT_MS}), got ${JSON.stringify(env.OPERATION_TIMEOUT_MS ?? String(e.OPERATION_TIMEOUT_MS))}`,
    );
  }
  let trustedDocuments: TrustedDocuments | undefined;
  try {
    trustedDocuments =
      e.TRUSTED_DOCUMENTS_FILE === undefined ? undefined : loadTrustedDocuments(e.TRUSTED_DOCUMENTS_FILE);
  } catch (error) {
    if (error instanceof TrustedDocumentsError) throw new ConfigError(`TRUSTED_DOCUMENTS_FILE: ${error.message}`);
    throw error;
  }
  if (e.TRUSTED_DOCUMENTS_ONLY && trustedDocuments === undefined) {
    throw new ConfigError(
      `TRUSTED_DOCUMENTS_ONLY: expected TRUSTED_DOCUMENTS_FILE to name the manifest of trusted documents, got ${JSON.stringify(env.TRUSTED_DOCUMENTS_ONLY)} without one`,
    );
  }
  // A burst smaller than one operation's budget would refuse that operation forever.
  if (
    e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND !== undefined &&
    e.RATE_LIMIT_WINDOW_SECONDS * e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND < e.UPSTREAM_CALL_BUDGET
  ) {
    throw new ConfigError(
      `RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: expected at least ${Math.ceil(e.UPSTREAM_CALL_BUDGET / e.RATE_LIMIT_WINDOW_SECONDS)}, so that one operation's UPSTREAM_CALL_BUDGET (${e.UPSTREAM_CALL_BUDGET}) fits in a burst of RATE_LIMIT_WINDOW_SECONDS (${e.RATE_LIMIT_WINDOW_SECONDS}), got ${JSON.stringify(env.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND)}`,
    );
  }
  if (e.CIRCUIT_BREAKER_MIN_CALLS > e.CIRCUIT_BREAKER_WINDOW) {
    throw new ConfigError(
      `CIRCUIT_BREAKER_MIN_CALLS: expected at most CIRCUIT_BREAKER_WINDOW (${e.CIRCUIT_BREAKER_WINDOW}), got ${JSON.stringify(env.CIRCUIT_BREAKER_MIN_CALLS ?? String(e.CIRCUIT_BREAKER_MIN_CALLS))}`,
    );
  }
  if (e.REDIS_SENTINEL_PASSWORD !== undefined && e.REDIS_URL?.kind !== 'sentinel') {
    throw new ConfigError(
      'REDIS_SENTINEL_PASSWORD: expected a redis-sentinel:// (or rediss-sentinel://) REDIS_URL beside it, got a password without Sentinels',
    );
  }
  return settingsFrom(e, env, routes, trustedDocuments);
}

/**
 * The settings made of the parsed environment, grouped as the server needs them (the type `Config`
 * is): every variable that is a setting as parsed at the place it declares (config/places.ts), and
 * over them those made of several variables, or checked, here.
 */
function settingsFrom(
  e: Environment,
  env: NodeJS.ProcessEnv,
  routes: RouteTable,
  trustedDocuments: TrustedDocuments | undefined,
) {
  const placed = placedSettings(environment.shape, e);
  // The upstream layer takes these groups as its own options.
  placed.resilience satisfies { readonly breaker: CircuitSettings; readonly retryBudget: RetryBudgetSettings };
  const production = e.NODE_ENV === 'production';
  /**
   * How upstream reads are chosen (PLANNER): `selection` (on) picks the fewest reads that cover
   * what the operation selects, which assumes Get Heads and Get Heads Ext list the same collection
   * in the same order; `plain` (off) reads every need through its one read.
   */
  const planner: Strategy = e.PLANNER === 'on' ? 'selection' : 'plain';
  return Object.freeze({
    ...placed,
    /** The default routes with UPSTREAM_ROUTES_FILE's rows over them. */
    routes,
    /** INTROSPECTION, or else not in production. */
    introspection: e.INTROSPECTION ?? !production,
    planner,
    compiledExecution: e.COMPILED_EXECUTION === 'on',
    /** Empty: same-origin only. */
    corsOrigins: Object.freeze(e.CORS_ORIGINS ?? []) as readonly string[],
    /** With the manifest TRUSTED_DOCUMENTS_FILE names, if any. */
    persistedDocuments: Object.freeze({ ...placed.persistedDocuments, trustedDocuments }),
    connections: connectionSettings(e, env, placed.connections),
    loadShedding: Object.freeze({
      ...placed.loadShedding,
      // As many as the pool serves at once: past that, an operation waits in its queue for a whole upstream call
      // (docs/operations.md#load-shedding).
      /** Operations in flight in this process past which a new one is refused; 0: no cap. */
      maxInFlight: e.SHED_MAX_IN_FLIGHT ?? e.UPSTREAM_CONNECTIONS,
      // More calls waiting than one operation may have in flight: operations, not one, wait for the pool.
      /** Upstream calls waiting for a pool connection at which the gateway is overloaded; 0: not watched. */
      maxUpstreamQueued: e.SHED_MAX_UPSTREAM_QUEUED ?? e.UPSTREAM_FANOUT,
    }),
    /** undefined: no response cache (RESPONSE_CACHE_TTL_MS unset or 0). */
    responseCache: responseCacheSettings(e, env, placed.responseCache),
    /**
     * REDIS_URL (and REDIS_SENTINEL_PASSWORD); undefined keeps the limit counters, APQ and the response cache in
     * process memory. Holds passwords, never logged.
     */
    redis:
      e.REDIS_URL === undefined
        ? undefined
        : Object.freeze({ topology: e.REDIS_URL, sentinelPassword: e.REDIS_SENTINEL_PASSWORD }),
    /**
     * RESPONSE_CACHE_REDIS_URL: the response cache's own Redis; undefined: REDIS_URL's (or process memory). Holds
     * passwords, never logged.
     */
    responseCacheRedis:
      e.RESPONSE_CACHE_REDIS_URL === undefined
        ? undefined
        : Object.freeze({ topology: e.RESPONSE_CACHE_REDIS_URL, sentinelPassword: e.REDIS_SENTINEL_PASSWORD }),
    /**
     * How operations are labelled in metrics: `known` always apart (with the manifest's names), at most `max` others,
     * the first seen.
     */
    metricsOperations: Object.freeze({
      ...placed.metricsOperations,
      known: e.METRICS_KNOWN_OPERATIONS ?? new Set<string>(),
    }),
    metricsClients: Object.freeze({
      ...placed.metricsClients,
      knownNames: e.METRICS_KNOWN_CLIENTS ?? new Set<string>(),
    }),
    production,
    /** The OTEL_* variables. */
    tracing: tracingSettings(e, placed.tracing),
  });
}

/** The settings the variables are as parsed, at the places they declare: what the settings below build on. */
type VariableSettings = PlacedSettings<typeof environment.shape>;

function responseCacheSettings(e: Environment, env: NodeJS.ProcessEnv, placed: VariableSettings['responseCache']) {
  const ttlPerType = e.RESPONSE_CACHE_TTL_PER_TYPE ?? {};
  // A name the schema has no object type for would never match an answer: a typo, said at start.
  const unknown = Object.keys(ttlPerType).filter(
    (name) => name.startsWith('__') || !isObjectType(schema.getType(name)),
  );
  if (unknown.length > 0) {
    throw new ConfigError(
      `RESPONSE_CACHE_TTL_PER_TYPE: expected object type names of the schema (such as Head, Hair, Permission), got ${unknown.map((name) => JSON.stringify(name)).join(', ')} in ${JSON.stringify(env.RESPONSE_CACHE_TTL_PER_TYPE)}`,
    );
  }
  if (placed.ttlMs === 0) return undefined;
  return Object.freeze({
    ...placed,
    /** RESPONSE_CACHE_TTL_PER_TYPE: object type names of the schema, and their TTL in ms. */
    ttlPerType: Object.freeze(ttlPerType) as Readonly<Record<string, number>>,
    /**
     * RESPONSE_CACHE_MAX_ENTRIES (in process memory only), RESPONSE_CACHE_MAX_BYTES (either store:
     * each process's, or Redis for all) and a caller's share of those bytes (RESPONSE_CACHE_CALLER_SHARE).
     */
    bounds: Object.freeze({
      ...placed.bounds,
      callerBytes: Math.floor(placed.bounds.maxBytes * e.RESPONSE_CACHE_CALLER_SHARE),
    }),
  });
}

function tracingSettings(e: Environment, placed: VariableSettings['tracing']): TracingSettings {
  return Object.freeze({
    ...placed,
    tracesUrl:
      e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined ? undefined : signalUrl(e.OTEL_EXPORTER_OTLP_ENDPOINT, 'v1/traces'),
  });
}

/**
 * MAX_CONNECTIONS's default: what `limit` leaves for client connections (config/descriptors.ts); refused when that is
 * nothing.
 */
export function maxConnectionsFor(limit: number, upstreamConnections: number, embeddedUpstream: boolean): number {
  const left = descriptorsForClients(limit, upstreamConnections, embeddedUpstream);
  if (left < 1) {
    throw new ConfigError(
      `MAX_CONNECTIONS: expected a file-descriptor limit (ulimit -n) with room for client connections beside UPSTREAM_CONNECTIONS (${upstreamConnections}) and ${RESERVED_DESCRIPTORS} for the process, got ${limit}: raise the limit or lower UPSTREAM_CONNECTIONS`,
    );
  }
  return left;
}

function connectionSettings(e: Environment, env: NodeJS.ProcessEnv, placed: VariableSettings['connections']) {
  // Node refuses a head timeout longer than the request's.
  if (e.HEADERS_TIMEOUT_MS > e.REQUEST_TIMEOUT_MS) {
    throw new ConfigError(
      `HEADERS_TIMEOUT_MS: expected at most REQUEST_TIMEOUT_MS (${e.REQUEST_TIMEOUT_MS}), got ${JSON.stringify(env.HEADERS_TIMEOUT_MS ?? String(e.HEADERS_TIMEOUT_MS))}`,
    );
  }
  if (e.ADMIN_PORT !== undefined && e.ADMIN_PORT !== 0 && e.ADMIN_PORT === e.PORT) {
    throw new ConfigError(
      `ADMIN_PORT: expected a port other than PORT (${e.PORT}), got ${JSON.stringify(env.ADMIN_PORT)}`,
    );
  }
  return Object.freeze({
    ...placed,
    /** MAX_CONNECTIONS, or what the file-descriptor limit leaves (maxConnectionsFor). */
    maxConnections:
      e.MAX_CONNECTIONS ?? maxConnectionsFor(descriptorLimit(), e.UPSTREAM_CONNECTIONS, e.UPSTREAM_URL === undefined),
    /** Connections open at once on the admin port: probes and scrapes need a few (config/descriptors.ts). */
    adminMaxConnections: ADMIN_MAX_CONNECTIONS,
  });
}

const unsetEnvironment = environment.parse({});
/** Tracing with every OTEL_* variable unset: for gateways and transports built without a configuration. */
export const defaultTracingSettings: TracingSettings = tracingSettings(
  unsetEnvironment,
  placedSettings(environment.shape, unsetEnvironment).tracing,
);

/** OTEL_EXPORTER_OTLP_ENDPOINT is a base: the signal's path goes after it, keeping its own path. */
function signalUrl(endpoint: string, path: string): string {
  return endpoint.endsWith('/') ? endpoint + path : `${endpoint}/${path}`;
}
