import { isObjectType } from 'graphql';
import { environment, type Environment } from './config/environment.js';
import { ADMIN_MAX_CONNECTIONS, descriptorLimit, descriptorsForClients, RESERVED_DESCRIPTORS } from './config/descriptors.js';
import { loadTrustedDocuments, TrustedDocumentsError, type TrustedDocuments } from './config/trusted-documents.js';
import type { Strategy } from './domain/needs.js';
import { schema } from './schema/index.js';
import { loadRouteTable, RouteConfigError, type RouteTable } from './upstream/routes.js';
import type { TracingSettings } from './telemetry/tracing.js';
import type { CircuitSettings } from './upstream/circuit.js';
import type { RetryBudgetSettings } from './upstream/retry-budget.js';

export type { RedisCredentials, RedisNode, RedisTopology } from './config/values.js';
export type { TrustedDocuments } from './config/trusted-documents.js';

/**
 * What the gateway runs with, read once from the environment and handed down, grouped as the
 * server needs it: the layers below take their part as options. Its type is what `settingsFrom`
 * makes of the parsed environment (config/environment.ts: every variable once, with its default,
 * its range and what it does), not a second list kept by hand.
 */
export type Config = ReturnType<typeof settingsFrom>;

/** The upstream's breaker, its retry budget and shared calls: CIRCUIT_BREAKER_*, UPSTREAM_RETRY_BUDGET_*, UPSTREAM_DEDUPE. */
export type ResilienceSettings = Config['resilience'];
/** How a process stops on SIGTERM: out of rotation first (SHUTDOWN_DELAY_MS), then drained (SHUTDOWN_GRACE_MS). */
export type ShutdownSettings = Config['shutdown'];
/** Where the shared state lives: REDIS_URL's topology, and the Sentinels' own password. */
export type SharedStateSettings = NonNullable<Config['redis']>;
/** Client connections: how long a request may take to arrive, how many may be open, the admin port. */
export type ConnectionSettings = Config['connections'];
/** A cache of something derived from each distinct document, the least recently used dropped first (its entries, and the heap bytes they may hold together). */
export type CacheBounds = Config['documentCache'];
/** Which queries graphql-jit compiles (server/documents/compiled-execution.ts). */
export type CompiledQueryThresholds = Config['compiledQueries'];
/** Per-operation limits refused before execution (GraphQL Armor and the body cap): MAX_DEPTH, MAX_ALIASES and the rest. */
export type OperationLimits = Config['limits'];
/** The client names and versions /metrics keeps apart, the first seen (server/instruments/client-awareness.ts). */
export type ClientMetricsBounds = Config['metricsClients'];
/** Per-caller limits, the RATE_LIMIT_* variables (undefined: off). A caller is its bearer token, hashed, or its client address. */
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
    const got = variable === 'REDIS_URL' || variable === 'REDIS_SENTINEL_PASSWORD' ? 'something else' : JSON.stringify(env[variable]);
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
    throw new ConfigError(`OPERATION_TIMEOUT_MS: expected more than UPSTREAM_TIMEOUT_MS (${e.UPSTREAM_TIMEOUT_MS}), got ${JSON.stringify(env.OPERATION_TIMEOUT_MS ?? String(e.OPERATION_TIMEOUT_MS))}`);
  }
  let trustedDocuments: TrustedDocuments | undefined;
  try {
    trustedDocuments = e.TRUSTED_DOCUMENTS_FILE === undefined ? undefined : loadTrustedDocuments(e.TRUSTED_DOCUMENTS_FILE);
  } catch (error) {
    if (error instanceof TrustedDocumentsError) throw new ConfigError(`TRUSTED_DOCUMENTS_FILE: ${error.message}`);
    throw error;
  }
  if (e.TRUSTED_DOCUMENTS_ONLY && trustedDocuments === undefined) {
    throw new ConfigError(`TRUSTED_DOCUMENTS_ONLY: expected TRUSTED_DOCUMENTS_FILE to name the manifest of trusted documents, got ${JSON.stringify(env.TRUSTED_DOCUMENTS_ONLY)} without one`);
  }
  // A burst smaller than one operation's budget would refuse that operation forever.
  if (e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND !== undefined && e.RATE_LIMIT_WINDOW_SECONDS * e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND < e.UPSTREAM_CALL_BUDGET) {
    throw new ConfigError(
      `RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: expected at least ${Math.ceil(e.UPSTREAM_CALL_BUDGET / e.RATE_LIMIT_WINDOW_SECONDS)}, so that one operation's UPSTREAM_CALL_BUDGET (${e.UPSTREAM_CALL_BUDGET}) fits in a burst of RATE_LIMIT_WINDOW_SECONDS (${e.RATE_LIMIT_WINDOW_SECONDS}), got ${JSON.stringify(env.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND)}`,
    );
  }
  if (e.CIRCUIT_BREAKER_MIN_CALLS > e.CIRCUIT_BREAKER_WINDOW) {
    throw new ConfigError(`CIRCUIT_BREAKER_MIN_CALLS: expected at most CIRCUIT_BREAKER_WINDOW (${e.CIRCUIT_BREAKER_WINDOW}), got ${JSON.stringify(env.CIRCUIT_BREAKER_MIN_CALLS ?? String(e.CIRCUIT_BREAKER_MIN_CALLS))}`);
  }
  if (e.REDIS_SENTINEL_PASSWORD !== undefined && e.REDIS_URL?.kind !== 'sentinel') {
    throw new ConfigError('REDIS_SENTINEL_PASSWORD: expected a redis-sentinel:// (or rediss-sentinel://) REDIS_URL beside it, got a password without Sentinels');
  }
  return settingsFrom(e, env, routes, trustedDocuments);
}

/** The settings made of the parsed environment, grouped as the server needs them (the type `Config` is). */
function settingsFrom(e: Environment, env: NodeJS.ProcessEnv, routes: RouteTable, trustedDocuments: TrustedDocuments | undefined) {
  const production = e.NODE_ENV === 'production';
  const planner: Strategy = e.PLANNER === 'on' ? 'selection' : 'plain';
  return Object.freeze({
    /** undefined: start the embedded reference upstream. */
    upstreamUrl: e.UPSTREAM_URL,
    port: e.PORT,
    host: e.HOST,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    upstreamConnections: e.UPSTREAM_CONNECTIONS,
    /** The default routes with UPSTREAM_ROUTES_FILE's rows over them. */
    routes,
    upstreamKeepAliveMs: e.UPSTREAM_KEEPALIVE_MS,
    upstreamMaxResponseBytes: e.UPSTREAM_MAX_RESPONSE_BYTES,
    upstreamFanout: e.UPSTREAM_FANOUT,
    upstreamCallBudget: e.UPSTREAM_CALL_BUDGET,
    resilience: Object.freeze({
      breaker: Object.freeze({ failureRatio: e.CIRCUIT_BREAKER_FAILURE_RATIO, window: e.CIRCUIT_BREAKER_WINDOW, minimumCalls: e.CIRCUIT_BREAKER_MIN_CALLS, resetMs: e.CIRCUIT_BREAKER_RESET_MS }) satisfies CircuitSettings,
      retryBudget: Object.freeze({ ratio: e.UPSTREAM_RETRY_BUDGET_RATIO, minPerSecond: e.UPSTREAM_RETRY_BUDGET_MIN_PER_SECOND }) satisfies RetryBudgetSettings,
      dedupe: e.UPSTREAM_DEDUPE,
    }),
    maxResultItems: e.MAX_RESULT_ITEMS,
    maxResponseBytes: e.MAX_RESPONSE_BYTES,
    /** More than UPSTREAM_TIMEOUT_MS. */
    operationTimeoutMs: e.OPERATION_TIMEOUT_MS,
    /** INTROSPECTION, or else not in production. */
    introspection: e.INTROSPECTION ?? !production,
    /**
     * How upstream reads are chosen (PLANNER): `selection` (on) picks the fewest reads that cover
     * what the operation selects, which assumes Get Heads and Get Heads Ext list the same collection
     * in the same order; `plain` (off) reads every need through its one read.
     */
    planner,
    compiledExecution: e.COMPILED_EXECUTION === 'on',
    compiledQueries: Object.freeze({
      /** COMPILED_EXECUTION_AT_RUN: the run of a query at which it is compiled. */
      afterExecutions: e.COMPILED_EXECUTION_AT_RUN,
      maxFields: e.COMPILED_EXECUTION_MAX_FIELDS,
    }),
    compiledDocuments: Object.freeze({ maxEntries: e.COMPILED_EXECUTION_MAX_ENTRIES, maxBytes: e.COMPILED_EXECUTION_MAX_BYTES }),
    documentCache: Object.freeze({ maxEntries: e.DOCUMENT_CACHE_MAX_ENTRIES, maxBytes: e.DOCUMENT_CACHE_MAX_BYTES }),
    /** Empty: same-origin only. */
    corsOrigins: Object.freeze(e.CORS_ORIGINS ?? []) as readonly string[],
    csrfPrevention: e.CSRF_PREVENTION,
    limits: Object.freeze({ maxDepth: e.MAX_DEPTH, maxAliases: e.MAX_ALIASES, maxTokens: e.MAX_TOKENS, maxDirectives: e.MAX_DIRECTIVES, maxRepeatedFields: e.MAX_REPEATED_FIELDS, maxFragmentPairs: e.MAX_FRAGMENT_PAIRS, maxVariablesDepth: e.MAX_VARIABLES_DEPTH, maxBodyBytes: e.MAX_BODY_BYTES }),
    maxBatch: e.MAX_BATCH,
    persistedDocuments: Object.freeze({
      apqMaxEntries: e.APQ_MAX_ENTRIES,
      apqMaxBytes: e.APQ_MAX_BYTES,
      /** In Redis; in memory only the two bounds apply. */
      apqTtlSeconds: e.APQ_TTL_SECONDS,
      /** The manifest TRUSTED_DOCUMENTS_FILE names, if any. */
      trustedDocuments,
      trustedDocumentsOnly: e.TRUSTED_DOCUMENTS_ONLY,
    }),
    compressionMinBytes: e.COMPRESSION_MIN_BYTES,
    shutdown: Object.freeze({
      /** SHUTDOWN_DELAY_MS: /ready answers 503 while both ports serve as before. */
      delayMs: e.SHUTDOWN_DELAY_MS,
      /** SHUTDOWN_GRACE_MS: then in-flight requests may finish for this long. */
      graceMs: e.SHUTDOWN_GRACE_MS,
    }),
    connections: connectionSettings(e, env),
    callerLimits: Object.freeze({
      requestsPerSecond: e.RATE_LIMIT_REQUESTS_PER_SECOND,
      /** Charged with the plan's calls before execution. */
      upstreamCallsPerSecond: e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND,
      inFlight: e.RATE_LIMIT_IN_FLIGHT,
      /** Made-up tokens share their address's window. */
      addressRequestsPerSecond: e.RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND,
      /** The window of the per-second limits: a caller may spend this many seconds' worth at once. */
      windowSeconds: e.RATE_LIMIT_WINDOW_SECONDS,
      trustProxy: e.TRUST_PROXY,
    }),
    loadShedding: Object.freeze({
      // As many as the pool serves at once: past that, an operation waits in its queue for a whole upstream call (docs/operations.md#load-shedding).
      /** Operations in flight in this process past which a new one is refused; 0: no cap. */
      maxInFlight: e.SHED_MAX_IN_FLIGHT ?? e.UPSTREAM_CONNECTIONS,
      /** The event loop's sampled delay past which a new operation is refused; 0: not watched for shedding. */
      eventLoopDelayMs: e.SHED_EVENT_LOOP_DELAY_MS,
      // More calls waiting than one operation may have in flight: operations, not one, wait for the pool.
      /** Upstream calls waiting for a pool connection at which the gateway is overloaded; 0: not watched. */
      maxUpstreamQueued: e.SHED_MAX_UPSTREAM_QUEUED ?? e.UPSTREAM_FANOUT,
      retryAfterSeconds: e.SHED_RETRY_AFTER_SECONDS,
    }),
    /** undefined: no response cache (RESPONSE_CACHE_TTL_MS unset or 0). */
    responseCache: responseCacheSettings(e, env),
    /** REDIS_URL (and REDIS_SENTINEL_PASSWORD); undefined keeps the limit counters, APQ and the response cache in process memory. Holds passwords, never logged. */
    redis: e.REDIS_URL === undefined ? undefined : Object.freeze({ topology: e.REDIS_URL, sentinelPassword: e.REDIS_SENTINEL_PASSWORD }),
    /** RESPONSE_CACHE_REDIS_URL: the response cache's own Redis; undefined: REDIS_URL's (or process memory). Holds passwords, never logged. */
    responseCacheRedis: e.RESPONSE_CACHE_REDIS_URL === undefined ? undefined : Object.freeze({ topology: e.RESPONSE_CACHE_REDIS_URL, sentinelPassword: e.REDIS_SENTINEL_PASSWORD }),
    /** How operations are labelled in metrics: `known` always apart (with the manifest's names), at most `max` others, the first seen. */
    metricsOperations: Object.freeze({ known: e.METRICS_KNOWN_OPERATIONS ?? new Set<string>(), max: e.METRICS_OPERATION_NAMES }),
    metricsClients: Object.freeze({ knownNames: e.METRICS_KNOWN_CLIENTS ?? new Set<string>(), maxNames: e.METRICS_CLIENT_NAMES, maxVersions: e.METRICS_CLIENT_VERSIONS }),
    /** `auto` counted. */
    workers: e.WORKERS,
    logLevel: e.LOG_LEVEL,
    /** Which operations get a log line: OPERATION_LOG, and OPERATION_LOG_SLOW_MS for `failures`. */
    operationLog: Object.freeze({ which: e.OPERATION_LOG, slowMs: e.OPERATION_LOG_SLOW_MS }),
    production,
    /** The OTEL_* variables. */
    tracing: tracingSettings(e),
  });
}

function responseCacheSettings(e: Environment, env: NodeJS.ProcessEnv) {
  const ttlPerType = e.RESPONSE_CACHE_TTL_PER_TYPE ?? {};
  // A name the schema has no object type for would never match an answer: a typo, said at start.
  const unknown = Object.keys(ttlPerType).filter((name) => name.startsWith('__') || !isObjectType(schema.getType(name)));
  if (unknown.length > 0) {
    throw new ConfigError(`RESPONSE_CACHE_TTL_PER_TYPE: expected object type names of the schema (such as Head, Hair, Permission), got ${unknown.map((name) => JSON.stringify(name)).join(', ')} in ${JSON.stringify(env.RESPONSE_CACHE_TTL_PER_TYPE)}`);
  }
  if (e.RESPONSE_CACHE_TTL_MS === 0) return undefined;
  return Object.freeze({
    ttlMs: e.RESPONSE_CACHE_TTL_MS,
    /** RESPONSE_CACHE_TTL_PER_TYPE: object type names of the schema, and their TTL in ms. */
    ttlPerType: Object.freeze(ttlPerType) as Readonly<Record<string, number>>,
    /**
     * RESPONSE_CACHE_MAX_ENTRIES (in process memory only), RESPONSE_CACHE_MAX_BYTES (either store:
     * each process's, or Redis for all) and a caller's share of those bytes (RESPONSE_CACHE_CALLER_SHARE).
     */
    bounds: Object.freeze({ maxEntries: e.RESPONSE_CACHE_MAX_ENTRIES, maxBytes: e.RESPONSE_CACHE_MAX_BYTES, callerBytes: Math.floor(e.RESPONSE_CACHE_MAX_BYTES * e.RESPONSE_CACHE_CALLER_SHARE) }),
    /** The largest answer either store keeps. */
    maxEntryBytes: e.RESPONSE_CACHE_MAX_ENTRY_BYTES,
    /** RESPONSE_CACHE_STALE_IF_ERROR_MS: how long past its TTL an answer is kept, for a read that fails (0: not at all). */
    staleIfErrorMs: e.RESPONSE_CACHE_STALE_IF_ERROR_MS,
  });
}

function tracingSettings(e: Environment): TracingSettings {
  return Object.freeze({
    tracesUrl: e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined ? undefined : signalUrl(e.OTEL_EXPORTER_OTLP_ENDPOINT, 'v1/traces'),
    protocol: e.OTEL_EXPORTER_OTLP_PROTOCOL,
    serviceName: e.OTEL_SERVICE_NAME,
    sampler: e.OTEL_TRACES_SAMPLER,
    samplerRatio: e.OTEL_TRACES_SAMPLER_ARG,
  });
}

/** MAX_CONNECTIONS's default: what `limit` leaves for client connections (config/descriptors.ts); refused when that is nothing. */
export function maxConnectionsFor(limit: number, upstreamConnections: number, embeddedUpstream: boolean): number {
  const left = descriptorsForClients(limit, upstreamConnections, embeddedUpstream);
  if (left < 1) {
    throw new ConfigError(
      `MAX_CONNECTIONS: expected a file-descriptor limit (ulimit -n) with room for client connections beside UPSTREAM_CONNECTIONS (${upstreamConnections}) and ${RESERVED_DESCRIPTORS} for the process, got ${limit}: raise the limit or lower UPSTREAM_CONNECTIONS`,
    );
  }
  return left;
}

function connectionSettings(e: Environment, env: NodeJS.ProcessEnv) {
  // Node refuses a head timeout longer than the request's.
  if (e.HEADERS_TIMEOUT_MS > e.REQUEST_TIMEOUT_MS) {
    throw new ConfigError(`HEADERS_TIMEOUT_MS: expected at most REQUEST_TIMEOUT_MS (${e.REQUEST_TIMEOUT_MS}), got ${JSON.stringify(env.HEADERS_TIMEOUT_MS ?? String(e.HEADERS_TIMEOUT_MS))}`);
  }
  if (e.ADMIN_PORT !== undefined && e.ADMIN_PORT !== 0 && e.ADMIN_PORT === e.PORT) {
    throw new ConfigError(`ADMIN_PORT: expected a port other than PORT (${e.PORT}), got ${JSON.stringify(env.ADMIN_PORT)}`);
  }
  return Object.freeze({
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    /** MAX_CONNECTIONS, or what the file-descriptor limit leaves (maxConnectionsFor). */
    maxConnections: e.MAX_CONNECTIONS ?? maxConnectionsFor(descriptorLimit(), e.UPSTREAM_CONNECTIONS, e.UPSTREAM_URL === undefined),
    /** undefined: /health, /ready and /metrics on the public port only. */
    adminPort: e.ADMIN_PORT,
    /** Connections open at once on the admin port: probes and scrapes need a few (config/descriptors.ts). */
    adminMaxConnections: ADMIN_MAX_CONNECTIONS,
  });
}

/** Tracing with every OTEL_* variable unset: for gateways and transports built without a configuration. */
export const defaultTracingSettings: TracingSettings = tracingSettings(environment.parse({}));

/** OTEL_EXPORTER_OTLP_ENDPOINT is a base: the signal's path goes after it, keeping its own path. */
function signalUrl(endpoint: string, path: string): string {
  return endpoint.endsWith('/') ? endpoint + path : `${endpoint}/${path}`;
}
