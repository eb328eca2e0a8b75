import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { ADMIN_MAX_CONNECTIONS, descriptorLimit, descriptorsForClients, RESERVED_DESCRIPTORS } from './server/descriptors.js';
import type { Strategy } from './domain/needs.js';
import { loadTrustedDocuments, TrustedDocumentsError, type TrustedDocuments } from './server/trusted-documents.js';
import { loadRouteTable, RouteConfigError, type RouteTable } from './upstream/routes.js';
import { samplerNames, type TracingSettings } from './telemetry/tracing.js';

const integer = (min: number, max: number) =>
  z.coerce
    .number({ error: `an integer from ${min} to ${max}` })
    .int({ error: `an integer from ${min} to ${max}` })
    .min(min, { error: `an integer from ${min} to ${max}` })
    .max(max, { error: `an integer from ${min} to ${max}` });

const upstreamUrl = z
  .url({ protocol: /^https?$/, error: 'an http(s) URL ending in /v2' })
  .transform((url) => url.replace(/\/+$/, ''))
  .refine((url) => url.endsWith('/v2'), { error: 'an http(s) URL ending in /v2' });

const flag = (name: string) =>
  z.enum(['true', 'false', '1', '0', 'on', 'off'], { error: `true or false (${name})` }).transform((v) => v === 'true' || v === '1' || v === 'on');

const onOff = z.enum(['on', 'off'], { error: 'on or off' });

const originsMessage = 'a comma-separated list of http(s) origins, or *';
const origins = z
  .string()
  .transform((value) => value.split(',').map((origin) => origin.trim()).filter(Boolean))
  .pipe(z.array(z.union([z.literal('*'), z.url({ protocol: /^https?$/ }).transform((url) => new URL(url).origin)], { error: originsMessage })));

const otlpEndpoint = z.url({ protocol: /^https?$/, error: 'an http(s) URL of an OTLP/HTTP receiver' });

const environment = z.object({
  UPSTREAM_URL: upstreamUrl.optional(),
  PORT: integer(0, 65_535).default(4000),
  HOST: z.string().min(1, { error: 'a host name or address' }).default('127.0.0.1'),
  UPSTREAM_TIMEOUT_MS: integer(1, 600_000).default(10_000),
  UPSTREAM_CONNECTIONS: integer(1, 10_000).default(100),
  UPSTREAM_ROUTES_FILE: z.string().min(1, { error: 'a path to a JSON file' }).optional(),
  UPSTREAM_KEEPALIVE_MS: integer(1, 600_000).default(4_000),
  UPSTREAM_MAX_RESPONSE_BYTES: integer(1_024, 1_073_741_824).default(5 * 1024 * 1024),
  UPSTREAM_FANOUT: integer(1, 1_000).default(10),
  UPSTREAM_CALL_BUDGET: integer(1, 100_000).default(100),
  MAX_RESULT_ITEMS: integer(1, 1_000_000).default(1_000),
  MAX_RESPONSE_BYTES: integer(1_024, 1_073_741_824).default(4 * 1024 * 1024),
  OPERATION_TIMEOUT_MS: integer(1, 3_600_000).default(15_000),
  INTROSPECTION: flag('INTROSPECTION').optional(),
  PLANNER: onOff.default('on'),
  COMPILED_EXECUTION: onOff.default('on'),
  COMPILED_EXECUTION_MAX_ENTRIES: integer(1, 1_000_000).default(500),
  COMPILED_EXECUTION_MAX_BYTES: integer(1_048_576, 17_179_869_184).default(48 * 1024 * 1024),
  DOCUMENT_CACHE_MAX_ENTRIES: integer(1, 1_000_000).default(1_000),
  DOCUMENT_CACHE_MAX_BYTES: integer(1_048_576, 17_179_869_184).default(32 * 1024 * 1024),
  WORKERS: z
    .union([z.literal('auto'), integer(1, 256)], { error: 'a whole number from 1 to 256, or auto' })
    .default(1)
    .transform((value) => (value === 'auto' ? availableParallelism() : value)),
  CORS_ORIGINS: origins.optional(),
  CSRF_PREVENTION: flag('CSRF_PREVENTION').default(false),
  MAX_DEPTH: integer(1, 1_000).default(15),
  MAX_ALIASES: integer(1, 10_000).default(30),
  MAX_TOKENS: integer(1, 1_000_000).default(2_000),
  MAX_DIRECTIVES: integer(1, 10_000).default(20),
  MAX_REPEATED_FIELDS: integer(1, 1_000).default(10),
  MAX_BODY_BYTES: integer(1_024, 104_857_600).default(100_000),
  MAX_BATCH: integer(1, 100).default(10),
  APQ_MAX_ENTRIES: integer(1, 1_000_000).default(1_000),
  APQ_MAX_BYTES: integer(1_024, 1_073_741_824).default(5_000_000),
  TRUSTED_DOCUMENTS_FILE: z.string().min(1, { error: 'a path to a JSON file' }).optional(),
  TRUSTED_DOCUMENTS_ONLY: flag('TRUSTED_DOCUMENTS_ONLY').default(false),
  COMPRESSION_MIN_BYTES: integer(0, 104_857_600).default(1_024),
  // Per-caller limits: all off unless set (rate-limiter-flexible, plugins/caller-limits.ts).
  RATE_LIMIT_REQUESTS_PER_SECOND: integer(1, 1_000_000).optional(),
  RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: integer(1, 10_000_000).optional(),
  RATE_LIMIT_IN_FLIGHT: integer(1, 100_000).optional(),
  RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: integer(1, 1_000_000).optional(),
  TRUST_PROXY: flag('TRUST_PROXY').default(false),
  REDIS_URL: z.url({ protocol: /^rediss?$/, error: 'a redis:// or rediss:// URL' }).optional(),
  APQ_TTL_SECONDS: integer(60, 31_536_000).default(10_800),
  METRICS_OPERATION_NAMES: integer(1, 100_000).default(500),
  METRICS_CLIENT_NAMES: integer(1, 10_000).default(50),
  METRICS_CLIENT_VERSIONS: integer(1, 1_000).default(10),
  SHUTDOWN_GRACE_MS: integer(0, 600_000).default(10_000),
  HEADERS_TIMEOUT_MS: integer(100, 600_000).default(10_000),
  REQUEST_TIMEOUT_MS: integer(100, 3_600_000).default(30_000),
  // Default: what the file-descriptor limit leaves (maxConnectionsFor).
  MAX_CONNECTIONS: integer(1, 10_000_000).optional(),
  ADMIN_PORT: integer(0, 65_535).optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { error: 'one of fatal, error, warn, info, debug, trace, silent' }).default('info'),
  NODE_ENV: z.string().optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpEndpoint.optional(),
  // The spec's default; grpc would need another exporter (and HTTP/2), not offered.
  OTEL_EXPORTER_OTLP_PROTOCOL: z.enum(['http/protobuf', 'http/json'], { error: 'http/protobuf or http/json' }).default('http/protobuf'),
  OTEL_SERVICE_NAME: z.string().default('avatar-head-gateway'),
  OTEL_TRACES_SAMPLER: z.enum(samplerNames, { error: `one of ${samplerNames.join(', ')}` }).default('parentbased_always_on'),
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number({ error: 'a ratio from 0 to 1' }).min(0, { error: 'a ratio from 0 to 1' }).max(1, { error: 'a ratio from 0 to 1' }).default(1),
});

export interface Config {
  /** Base URL of the /v2 API; undefined means "start the embedded reference upstream". */
  readonly upstreamUrl: string | undefined;
  readonly port: number;
  readonly host: string;
  readonly upstreamTimeoutMs: number;
  readonly upstreamConnections: number;
  readonly routes: RouteTable;
  readonly upstreamKeepAliveMs: number;
  readonly upstreamMaxResponseBytes: number;
  /** Upstream calls one request may have in flight at once. */
  readonly upstreamFanout: number;
  /** Upstream calls one request (an operation, or a batch together) may make, estimated before and counted during execution. */
  readonly upstreamCallBudget: number;
  /** List entries one request's answer may hold, counted by the plan before execution. */
  readonly maxResultItems: number;
  /** Largest serialised answer; a larger one is replaced by an error. */
  readonly maxResponseBytes: number;
  /** One deadline for all upstream calls of an operation; longer than one call's timeout. */
  readonly operationTimeoutMs: number;
  readonly introspection: boolean;
  /**
   * How upstream reads are chosen (PLANNER): `selection` (on) picks the fewest reads that cover
   * what the operation selects, which assumes Get Heads and Get Heads Ext list the same collection
   * in the same order; `plain` (off) reads every need through its one read.
   */
  readonly planner: Strategy;
  /** Compile hot plain queries with graphql-jit (COMPILED_EXECUTION). */
  readonly compiledExecution: boolean;
  /** Compiled queries kept, by count and by estimated heap bytes. */
  readonly compiledDocuments: CacheBounds;
  /** Parsed documents kept by their text (yoga's parse cache), by count and by estimated heap bytes; what is kept per document follows them. */
  readonly documentCache: CacheBounds;
  /** Origins allowed by CORS; empty means same-origin only. */
  readonly corsOrigins: readonly string[];
  /**
   * Refuse a GET, or a form- or text-typed POST, without a header a browser cannot send cross-site
   * without a CORS preflight (CSRF_PREVENTION). Off: the gateway reads no cookie, only the
   * Authorization header a page must set itself; on behind a proxy that turns cookies into tokens.
   */
  readonly csrfPrevention: boolean;
  readonly limits: OperationLimits;
  /** Operations one batched POST (a JSON array) may carry. */
  readonly maxBatch: number;
  readonly persistedDocuments: PersistedDocumentsSettings;
  /** Responses smaller than this go out uncompressed; larger ones as Accept-Encoding asks. */
  readonly compressionMinBytes: number;
  readonly shutdownGraceMs: number;
  readonly connections: ConnectionSettings;
  readonly callerLimits: CallerLimitSettings;
  /** Redis shared by every process and replica (limit counters, APQ); undefined keeps both in process memory. Holds a password, never logged. */
  readonly redisUrl: string | undefined;
  /** Operation names /metrics keeps apart when there is no trusted-documents manifest (the first seen); the rest are `other`. */
  readonly metricsOperationNames: number;
  /** Client apps /metrics keeps apart (the first names seen, and the first versions under each name); the rest are `other`. */
  readonly metricsClients: ClientMetricsBounds;
  /** Gateway processes behind one port (node:cluster); `auto` is one per CPU. */
  readonly workers: number;
  readonly logLevel: string;
  readonly production: boolean;
  readonly tracing: TracingSettings;
}

/** Client connections: how long a request may take to arrive, how many may be open, the admin port. */
export interface ConnectionSettings {
  /** A connection that has not sent a complete request head in this time is closed (HTTP 408). */
  readonly headersTimeoutMs: number;
  /** The same for the whole request, head and body. */
  readonly requestTimeoutMs: number;
  /** Client connections open at once on the public port; one more is closed as it arrives. */
  readonly maxConnections: number;
  /** Where /health, /ready and /metrics are also served, on HOST; undefined: on the public port only. */
  readonly adminPort: number | undefined;
  /** Connections open at once on the admin port: probes and scrapes need a few. */
  readonly adminMaxConnections: number;
}

/** A cache of something derived from each distinct document, the least recently used dropped first. */
export interface CacheBounds {
  readonly maxEntries: number;
  /** Estimated heap bytes the entries may hold together. */
  readonly maxBytes: number;
}

/** Per-operation limits refused before execution (GraphQL Armor and the body cap). */
export interface OperationLimits {
  readonly maxDepth: number;
  readonly maxAliases: number;
  readonly maxTokens: number;
  readonly maxDirectives: number;
  /** Most times one field (response key) may appear in one selection set. */
  readonly maxRepeatedFields: number;
  readonly maxBodyBytes: number;
}

/** The client names and versions /metrics keeps apart, the first seen (client-awareness.ts). */
export interface ClientMetricsBounds {
  /** Distinct client names; later ones are `other`. */
  readonly maxNames: number;
  /** Distinct versions under each name label; later ones are `other`. */
  readonly maxVersions: number;
}

/** Per-caller limits (undefined: off). A caller is its bearer token, hashed, or its client address. */
export interface CallerLimitSettings {
  /** Operations per second, a burst of two seconds' worth. */
  readonly requestsPerSecond: number | undefined;
  /** Planned upstream calls per second, charged before execution; a burst of two seconds' worth. */
  readonly upstreamCallsPerSecond: number | undefined;
  /** Operations in flight at once. */
  readonly inFlight: number | undefined;
  /** Operations per second from one client address, token or not (a burst of two seconds' worth): made-up tokens share their address's window. */
  readonly addressRequestsPerSecond: number | undefined;
  /** The client address is the first X-Forwarded-For hop (set by a proxy in front). */
  readonly trustProxy: boolean;
}

/** Documents a client may name by hash instead of sending their text. */
export interface PersistedDocumentsSettings {
  /**
   * Automatic persisted queries (Apollo's protocol) kept at most: in each process's memory (the
   * least recently used dropped first) and in Redis, every replica's together (the oldest first).
   */
  readonly apqMaxEntries: number;
  /** Bytes of query text the APQ store keeps at most, in memory and in Redis alike. */
  readonly apqMaxBytes: number;
  /** How long a registration lives in Redis (REDIS_URL); in memory only the two bounds above apply. */
  readonly apqTtlSeconds: number;
  /** The trusted documents manifest (TRUSTED_DOCUMENTS_FILE), if any. */
  readonly trustedDocuments: TrustedDocuments | undefined;
  /** Refuse every document that is not in the manifest (and register no APQ). */
  readonly trustedDocumentsOnly: boolean;
}

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
    const got = variable === 'REDIS_URL' ? 'something else' : JSON.stringify(env[variable]);
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
  if (e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND !== undefined && 2 * e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND < e.UPSTREAM_CALL_BUDGET) {
    throw new ConfigError(
      `RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: expected at least half of UPSTREAM_CALL_BUDGET (${e.UPSTREAM_CALL_BUDGET}), so that one operation fits in the burst, got ${JSON.stringify(env.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND)}`,
    );
  }
  const production = e.NODE_ENV === 'production';
  return Object.freeze({
    upstreamUrl: e.UPSTREAM_URL,
    port: e.PORT,
    host: e.HOST,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    upstreamConnections: e.UPSTREAM_CONNECTIONS,
    routes,
    upstreamKeepAliveMs: e.UPSTREAM_KEEPALIVE_MS,
    upstreamMaxResponseBytes: e.UPSTREAM_MAX_RESPONSE_BYTES,
    upstreamFanout: e.UPSTREAM_FANOUT,
    upstreamCallBudget: e.UPSTREAM_CALL_BUDGET,
    maxResultItems: e.MAX_RESULT_ITEMS,
    maxResponseBytes: e.MAX_RESPONSE_BYTES,
    operationTimeoutMs: e.OPERATION_TIMEOUT_MS,
    introspection: e.INTROSPECTION ?? !production,
    planner: e.PLANNER === 'on' ? 'selection' : 'plain',
    compiledExecution: e.COMPILED_EXECUTION === 'on',
    compiledDocuments: Object.freeze({ maxEntries: e.COMPILED_EXECUTION_MAX_ENTRIES, maxBytes: e.COMPILED_EXECUTION_MAX_BYTES }),
    documentCache: Object.freeze({ maxEntries: e.DOCUMENT_CACHE_MAX_ENTRIES, maxBytes: e.DOCUMENT_CACHE_MAX_BYTES }),
    corsOrigins: Object.freeze(e.CORS_ORIGINS ?? []),
    csrfPrevention: e.CSRF_PREVENTION,
    limits: Object.freeze({ maxDepth: e.MAX_DEPTH, maxAliases: e.MAX_ALIASES, maxTokens: e.MAX_TOKENS, maxDirectives: e.MAX_DIRECTIVES, maxRepeatedFields: e.MAX_REPEATED_FIELDS, maxBodyBytes: e.MAX_BODY_BYTES }),
    maxBatch: e.MAX_BATCH,
    persistedDocuments: Object.freeze({ apqMaxEntries: e.APQ_MAX_ENTRIES, apqMaxBytes: e.APQ_MAX_BYTES, apqTtlSeconds: e.APQ_TTL_SECONDS, trustedDocuments, trustedDocumentsOnly: e.TRUSTED_DOCUMENTS_ONLY }),
    compressionMinBytes: e.COMPRESSION_MIN_BYTES,
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    connections: connectionSettings(e, env),
    callerLimits: Object.freeze({
      requestsPerSecond: e.RATE_LIMIT_REQUESTS_PER_SECOND,
      upstreamCallsPerSecond: e.RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND,
      inFlight: e.RATE_LIMIT_IN_FLIGHT,
      addressRequestsPerSecond: e.RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND,
      trustProxy: e.TRUST_PROXY,
    }),
    redisUrl: e.REDIS_URL,
    metricsOperationNames: e.METRICS_OPERATION_NAMES,
    metricsClients: Object.freeze({ maxNames: e.METRICS_CLIENT_NAMES, maxVersions: e.METRICS_CLIENT_VERSIONS }),
    workers: e.WORKERS,
    logLevel: e.LOG_LEVEL,
    production,
    tracing: tracingSettings(e),
  });
}

function tracingSettings(e: z.infer<typeof environment>): TracingSettings {
  return Object.freeze({
    tracesUrl: e.OTEL_EXPORTER_OTLP_ENDPOINT === undefined ? undefined : signalUrl(e.OTEL_EXPORTER_OTLP_ENDPOINT, 'v1/traces'),
    protocol: e.OTEL_EXPORTER_OTLP_PROTOCOL,
    serviceName: e.OTEL_SERVICE_NAME,
    sampler: e.OTEL_TRACES_SAMPLER,
    samplerRatio: e.OTEL_TRACES_SAMPLER_ARG,
  });
}

/** MAX_CONNECTIONS's default: what `limit` leaves for client connections (server/descriptors.ts); refused when that is nothing. */
export function maxConnectionsFor(limit: number, upstreamConnections: number, embeddedUpstream: boolean): number {
  const left = descriptorsForClients(limit, upstreamConnections, embeddedUpstream);
  if (left < 1) {
    throw new ConfigError(
      `MAX_CONNECTIONS: expected a file-descriptor limit (ulimit -n) with room for client connections beside UPSTREAM_CONNECTIONS (${upstreamConnections}) and ${RESERVED_DESCRIPTORS} for the process, got ${limit}: raise the limit or lower UPSTREAM_CONNECTIONS`,
    );
  }
  return left;
}

function connectionSettings(e: z.infer<typeof environment>, env: NodeJS.ProcessEnv): ConnectionSettings {
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
    maxConnections: e.MAX_CONNECTIONS ?? maxConnectionsFor(descriptorLimit(), e.UPSTREAM_CONNECTIONS, e.UPSTREAM_URL === undefined),
    adminPort: e.ADMIN_PORT,
    adminMaxConnections: ADMIN_MAX_CONNECTIONS,
  });
}

/** Tracing with every OTEL_* variable unset: for gateways and transports built without a configuration. */
export const defaultTracingSettings: TracingSettings = tracingSettings(environment.parse({}));

/** OTEL_EXPORTER_OTLP_ENDPOINT is a base: the signal's path goes after it, keeping its own path. */
function signalUrl(endpoint: string, path: string): string {
  return endpoint.endsWith('/') ? endpoint + path : `${endpoint}/${path}`;
}
