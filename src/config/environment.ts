import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { samplerNames } from '../telemetry/tracing.js';
import { RESERVED_DESCRIPTORS } from './descriptors.js';
import { setting } from './places.js';
import {
  expecting,
  flag,
  httpUrl,
  integer,
  names,
  oneOf,
  openRatio,
  origins,
  proxyTrust,
  ratio,
  redisUrl,
  text,
  ttlPerType,
  upstreamUrl,
  variableDocs,
  workers,
} from './values.js';

/*
 * The environment the gateway reads: every variable once, with its default, its limits and what
 * it does. README.md's configuration table is rendered from this (scripts/config-table.ts, `npm
 * run generate`), so a default or a range is changed here and nowhere else. A variable that is a
 * setting as parsed names its place in the settings the layers below are handed
 * (`setting('limits.maxDepth', …)`, config/places.ts), and the settings are built from those
 * places; config.ts makes the others' settings itself, those that take several variables or a
 * check (MAX_CONNECTIONS from the descriptor limit, INTROSPECTION's default, the response cache).
 */

const mib = 1024 * 1024;
const off = 'unset: off';

export const environment = z.object({
  UPSTREAM_URL: setting('upstreamUrl', upstreamUrl().optional()).register(variableDocs, {
    unset: 'unset: embedded reference upstream',
    description: 'base URL of the REST API',
  }),
  PORT: setting('port', integer(0, 65_535).default(4000)).register(variableDocs, {
    description: 'port to listen on (0: any free port)',
  }),
  HOST: setting('host', text('a host name or address').default('127.0.0.1')).register(variableDocs, {
    description: 'address to listen on (`0.0.0.0` in a container)',
  }),
  UPSTREAM_TIMEOUT_MS: setting('upstreamTimeoutMs', integer(1, 600_000).default(10_000)).register(variableDocs, {
    description:
      "budget of one upstream call, retries and backoff included, from when it has a connection; a call may wait as long again for one of the pool's `UPSTREAM_CONNECTIONS`, then fails `OVERLOADED` unsent",
  }),
  OPERATION_TIMEOUT_MS: setting('operationTimeoutMs', integer(1, 3_600_000).default(15_000)).register(variableDocs, {
    description: 'one deadline for all upstream calls of an operation; must exceed `UPSTREAM_TIMEOUT_MS`',
  }),
  UPSTREAM_CALL_BUDGET: setting('upstreamCallBudget', integer(1, 100_000).default(100)).register(variableDocs, {
    description:
      "upstream calls one request may make, the operations of a batch together (their plans' count before execution; each operation's real calls during)",
  }),
  MAX_RESULT_ITEMS: setting('maxResultItems', integer(1, 1_000_000).default(1_000)).register(variableDocs, {
    description:
      "list entries one request's answer may hold, the operations of a batch together, counted by the plan before execution: a connection's window once per `nodes`/`edges` selected under it, `nodes(ids:)` its ids, times their aliases and enclosing lists",
  }),
  MAX_RESPONSE_BYTES: setting('maxResponseBytes', integer(1_024, 1_073_741_824).default(4 * mib)).register(
    variableDocs,
    {
      description:
        "largest JSON answer to one request (a batch's answers together); an answer past it is replaced by `RESULT_TOO_LARGE` (a backstop: the items limit bounds answers first)",
    },
  ),
  UPSTREAM_CONNECTIONS: setting('upstreamConnections', integer(1, 10_000).default(100)).register(variableDocs, {
    description: 'keep-alive connections to the upstream (one pool per process)',
  }),
  UPSTREAM_KEEPALIVE_MS: setting('upstreamKeepAliveMs', integer(1, 600_000).default(4_000)).register(variableDocs, {
    description: "idle keep-alive of upstream connections; keep it below the upstream's own",
  }),
  UPSTREAM_MAX_RESPONSE_BYTES: setting(
    'upstreamMaxResponseBytes',
    integer(1_024, 1_073_741_824).default(5 * mib),
  ).register(variableDocs, {
    description: 'largest upstream body accepted; a larger one is `UPSTREAM_ERROR` on that field',
  }),
  UPSTREAM_FANOUT: setting('upstreamFanout', integer(1, 1_000).default(10)).register(variableDocs, {
    description: 'upstream calls one request may have in flight at once',
  }),
  UPSTREAM_ROUTES_FILE: text('a path to a JSON file').optional().register(variableDocs, {
    unset: 'unset: the default routes',
    description: 'JSON file overriding rows of the route table',
  }),
  UPSTREAM_DEDUPE: setting('resilience.dedupe', flag().default(true)).register(variableDocs, {
    description:
      'identical upstream GETs in flight at once for the same caller (token, hashed) share one call and its answer; `false`: every request sends its own',
  }),
  UPSTREAM_RETRY_BUDGET_RATIO: setting('resilience.retryBudget.ratio', ratio().default(0.2)).register(variableDocs, {
    description:
      "retries of upstream GETs allowed per call over the last 10 s, across all requests (with `UPSTREAM_RETRY_BUDGET_MIN_PER_SECOND`), so retries add at most this share to a failing upstream's load",
  }),
  UPSTREAM_RETRY_BUDGET_MIN_PER_SECOND: setting(
    'resilience.retryBudget.minPerSecond',
    integer(0, 100_000).default(10),
  ).register(variableDocs, { description: 'retries allowed per second whatever the traffic, on top of the ratio' }),
  CIRCUIT_BREAKER_FAILURE_RATIO: setting('resilience.breaker.failureRatio', openRatio().default(0.5)).register(
    variableDocs,
    {
      description:
        "share of a breaker's last `CIRCUIT_BREAKER_WINDOW` upstream attempts failing that opens it: an operation's breaker counts its route's faults (5xx, the call timing out once it had a connection), the host's failed connections (refused, reset, no route, no name); never a 4xx, a client gone, the operation deadline or a wait for one of the gateway's own connections (`OVERLOADED`, unsent). Its calls (every call, for the host's) then fail at once with `UPSTREAM_UNAVAILABLE`, nothing sent",
    },
  ),
  CIRCUIT_BREAKER_WINDOW: setting('resilience.breaker.window', integer(1, 100_000).default(20)).register(variableDocs, {
    description:
      "attempts a breaker's failure ratio is taken over, its operation's (or every one, for the host's): a count, not a time, so it opens as fast at any traffic",
  }),
  CIRCUIT_BREAKER_MIN_CALLS: setting('resilience.breaker.minimumCalls', integer(1, 100_000).default(10)).register(
    variableDocs,
    { description: 'attempts a breaker sees before it may open; at most `CIRCUIT_BREAKER_WINDOW`' },
  ),
  CIRCUIT_BREAKER_RESET_MS: setting('resilience.breaker.resetMs', integer(1, 3_600_000).default(5_000)).register(
    variableDocs,
    {
      description:
        'how long a breaker stays open before one probe call is let through (it closes on success); what `extensions.retryAfterMs` and `Retry-After` count down',
    },
  ),
  MAX_DEPTH: setting('limits.maxDepth', integer(1, 1_000).default(15)).register(variableDocs, {
    description: "deepest selection (GraphiQL's introspection query fits)",
  }),
  MAX_ALIASES: setting('limits.maxAliases', integer(1, 10_000).default(30)).register(variableDocs, {
    description: 'aliases per operation, `__typename` aliases included',
  }),
  MAX_TOKENS: setting('limits.maxTokens', integer(1, 1_000_000).default(2_000)).register(variableDocs, {
    description: 'lexical tokens per document',
  }),
  MAX_DIRECTIVES: setting('limits.maxDirectives', integer(1, 10_000).default(20)).register(variableDocs, {
    description: 'directives per operation',
  }),
  MAX_REPEATED_FIELDS: setting('limits.maxRepeatedFields', integer(1, 1_000).default(10)).register(variableDocs, {
    description:
      'times one field (response key) may appear in one selection set, inline fragments opened; checked before validation, whose pairwise field-merging check a field repeated hundreds of times would hold for half a second',
  }),
  MAX_FRAGMENT_PAIRS: setting('limits.maxFragmentPairs', integer(1, 1_000_000).default(5_000)).register(variableDocs, {
    description:
      "pairs of fragments one request's documents may make validation compare (every two fragments merged into one selection set; a batch's documents share them); checked before validation, whose cost grows with their square, and for a document not yet kept first from its lexer tokens, before it is parsed",
  }),
  MAX_VARIABLES_DEPTH: setting('limits.maxVariablesDepth', integer(1, 10_000).default(100)).register(variableDocs, {
    description:
      "deepest nesting of a request's variables (objects and lists); deeper is refused before anything reads them",
  }),
  MAX_BODY_BYTES: setting('limits.maxBodyBytes', integer(1_024, 104_857_600).default(100_000)).register(variableDocs, {
    description: 'request body cap (413 above it, chunked bodies included; a compressed body counts as it inflates)',
  }),
  MAX_BATCH: setting('maxBatch', integer(1, 100).default(10)).register(variableDocs, {
    description: 'operations one batched POST (a JSON array) may carry',
  }),
  APQ_MAX_ENTRIES: setting('persistedDocuments.apqMaxEntries', integer(1, 1_000_000).default(1_000)).register(
    variableDocs,
    {
      description:
        "automatic persisted queries kept in each process's memory (least recently used dropped first) and, with `REDIS_URL`, in Redis for all replicas together (oldest registration dropped first)",
    },
  ),
  APQ_MAX_BYTES: setting('persistedDocuments.apqMaxBytes', integer(1_024, 1_073_741_824).default(5_000_000)).register(
    variableDocs,
    {
      description:
        "bytes of query text the APQ store keeps, all entries together: in each process's memory and, with `REDIS_URL`, in Redis for all replicas together; keep it well below Redis's `maxmemory`",
    },
  ),
  TRUSTED_DOCUMENTS_FILE: text('a path to a JSON file').optional().register(variableDocs, {
    unset: 'unset: none',
    description:
      'JSON manifest of trusted documents (`{"sha256:<hex>": "query …"}`), e.g. `src/generated/persisted-documents.json`; read and checked at start',
  }),
  TRUSTED_DOCUMENTS_ONLY: setting('persistedDocuments.trustedDocumentsOnly', flag().default(false)).register(
    variableDocs,
    {
      description:
        '`true`: run only documents of the manifest (needs `TRUSTED_DOCUMENTS_FILE`); query texts and APQ registrations are refused',
    },
  ),
  COMPRESSION_MIN_BYTES: setting('compressionMinBytes', integer(0, 104_857_600).default(1_024)).register(variableDocs, {
    description:
      'responses smaller than this are sent uncompressed; larger ones as `Accept-Encoding` asks (brotli, gzip, deflate)',
  }),
  // Per-caller limits: all off unless set (rate-limiter-flexible, server/traffic/caller-limits.ts).
  RATE_LIMIT_REQUESTS_PER_SECOND: setting('callerLimits.requestsPerSecond', integer(1, 1_000_000).optional()).register(
    variableDocs,
    {
      unset: off,
      description:
        "operations per caller per second, a burst of `RATE_LIMIT_WINDOW_SECONDS` seconds' worth (see [per-caller limits](docs/operations.md#per-caller-limits))",
    },
  ),
  RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: setting(
    'callerLimits.upstreamCallsPerSecond',
    integer(1, 10_000_000).optional(),
  ).register(variableDocs, {
    unset: off,
    description:
      "upstream calls per caller per second, charged with the operation's plan before execution, a burst of `RATE_LIMIT_WINDOW_SECONDS` seconds' worth, which must hold `UPSTREAM_CALL_BUDGET` (one operation's calls)",
  }),
  RATE_LIMIT_IN_FLIGHT: setting('callerLimits.inFlight', integer(1, 100_000).optional()).register(variableDocs, {
    unset: off,
    description:
      'operations one caller may have in flight at once (an `@defer`/`@stream` one until its last part is sent)',
  }),
  RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: setting(
    'callerLimits.addressRequestsPerSecond',
    integer(1, 1_000_000).optional(),
  ).register(variableDocs, {
    unset: off,
    description:
      "operations per client address per second, without a token or with one not known to be real (see `KNOWN_TOKENS_TTL_MS`), a burst of `RATE_LIMIT_WINDOW_SECONDS` seconds' worth (see [when to turn it on](docs/operations.md#per-address-limit))",
  }),
  RATE_LIMIT_WINDOW_SECONDS: setting('callerLimits.windowSeconds', integer(1, 3_600).default(2)).register(
    variableDocs,
    {
      description:
        "the window of the per-second limits above: a caller (or address) may spend this many seconds' worth at once, and the rate on average; `RateLimit-Policy` says it as `w`",
    },
  ),
  RATE_LIMIT_LOGINS_PER_MINUTE: setting('logins.perAccountPerMinute', integer(1, 1_000_000).default(10)).register(
    variableDocs,
    {
      description:
        'logins of one account (by a hash of its user name) a minute, through the gateway\'s `login`; one more is refused `RATE_LIMITED` (`limit: "logins"`) with no upstream call',
    },
  ),
  RATE_LIMIT_ADDRESS_LOGINS_PER_MINUTE: setting(
    'logins.perAddressPerMinute',
    integer(1, 1_000_000).default(60),
  ).register(variableDocs, { description: 'logins from one client address a minute, whatever the accounts' }),
  KNOWN_TOKENS_TTL_MS: setting('knownTokens.ttlMs', integer(1_000, 86_400_000).default(3_600_000)).register(
    variableDocs,
    {
      description:
        "how long a token is remembered as real (by its hash) once the upstream accepted it (a 2xx to Get Permissions or Delete Head, the operations the contract says check a token) or the gateway's `login` issued it: from then on a caller of its own for fair shedding and every per-caller limit, and not bound by the per-address limit; before, it is its address's (see [callers](docs/operations.md#callers))",
    },
  ),
  KNOWN_TOKENS_MAX: setting('knownTokens.max', integer(1, 10_000_000).default(100_000)).register(variableDocs, {
    description:
      'tokens remembered as real at most per process (the least recently seen forgotten first; with `REDIS_URL` each learnt one is told to every replica): some 200 bytes each',
  }),
  TRUST_PROXY: setting('callerLimits.trustProxy', proxyTrust().default(false)).register(variableDocs, {
    description:
      "which proxies in front may name the client address in `X-Forwarded-For` (as Express's `trust proxy`): the nearest N (`1` behind one load balancer), those at these addresses or subnets (`10.0.0.0/8,loopback`), or every hop (`true`: the leftmost, which a client can write itself unless the proxy overwrites the header); the client is the nearest hop not trusted. It is the address of a caller without a token known to be real (see [callers](docs/operations.md#callers))",
  }),
  // Load shedding (server/traffic/load-shedder.ts): on by default, each threshold off at 0.
  SHED_MAX_IN_FLIGHT: integer(0, 1_000_000).optional().register(variableDocs, {
    unset: '`UPSTREAM_CONNECTIONS`',
    description:
      "operations one process may have in flight (sent whole, answer not yet out; an `@defer`/`@stream` one until its last part; a request still sending its body holds none); past it a new one is refused at once with 503 `OVERLOADED` when it holds its fair share or more (its token's, once known to be real, else its address's), and whoever sends it at twice the cap; 0: no cap (see [load shedding](docs/operations.md#load-shedding))",
  }),
  SHED_EVENT_LOOP_DELAY_MS: setting('loadShedding.eventLoopDelayMs', integer(0, 60_000).default(250)).register(
    variableDocs,
    {
      description:
        "the event loop's delay (its median over the last 500 ms, less the 10 ms sampling interval) past which new operations are refused with 503 `OVERLOADED`, those of the callers holding their fair share or more; 0: not watched",
    },
  ),
  SHED_MAX_UPSTREAM_QUEUED: integer(0, 1_000_000).optional().register(variableDocs, {
    unset: '`UPSTREAM_FANOUT`',
    description:
      'upstream calls waiting for a connection of the pool (every one of `UPSTREAM_CONNECTIONS` busy) at which the gateway is overloaded as at `SHED_MAX_IN_FLIGHT`: what notices operations that each make many calls at once; 0: not watched',
  }),
  SHED_RETRY_AFTER_SECONDS: setting('loadShedding.retryAfterSeconds', integer(1, 3_600).default(1)).register(
    variableDocs,
    { description: 'the `Retry-After` of an `OVERLOADED` refusal' },
  ),
  REDIS_URL: redisUrl().optional().register(variableDocs, {
    unset: 'unset: process memory',
    description:
      'Redis for the limit counters, APQ registrations and the response cache, shared by every process and replica: one node (`redis://`), a master watched by Sentinels (`redis-sentinel://`) or a Cluster (`redis-cluster://`); see [deploy](docs/deploy.md#redis)',
  }),
  RESPONSE_CACHE_REDIS_URL: redisUrl().optional().register(variableDocs, {
    unset: 'unset: `REDIS_URL`',
    description:
      "a Redis of the response cache's own (any `REDIS_URL` form), so its answers never take the memory the limit counters and APQ registrations need in `REDIS_URL`'s; see [the response cache](docs/response-cache.md#redis-memory)",
  }),
  REDIS_SENTINEL_PASSWORD: text('any text').optional().register(variableDocs, {
    unset: 'unset: none',
    description:
      "the Sentinels' own password (`requirepass` in sentinel.conf), with a `redis-sentinel://` `REDIS_URL`; Redis's password goes in the URL",
  }),
  APQ_CALLER_SHARE: setting('persistedDocuments.apqCallerShare', openRatio().default(0.25)).register(variableDocs, {
    description:
      "the share of `APQ_MAX_ENTRIES` and `APQ_MAX_BYTES` the registrations of one caller (its token once known to be real, else its address) may take, and those of one client address whatever tokens it sent: past either, its own oldest registrations go, so no caller or address can push the others' out",
  }),
  APQ_TTL_SECONDS: setting('persistedDocuments.apqTtlSeconds', integer(60, 31_536_000).default(10_800)).register(
    variableDocs,
    {
      description:
        'how long an APQ registration lives in Redis (with `REDIS_URL`; see [shared state](docs/operations.md#shared-state-redis))',
    },
  ),
  // The response cache: off unless RESPONSE_CACHE_TTL_MS is set (server/response-cache/cache.ts,
  // docs/response-cache.md).
  RESPONSE_CACHE_TTL_MS: setting('responseCache.ttlMs', integer(0, 31_536_000_000).default(0)).register(variableDocs, {
    description:
      'how long an answer is kept in the response cache, per caller (bearer token) or in one public scope without a token; 0: no response cache (see [the response cache](docs/response-cache.md))',
  }),
  RESPONSE_CACHE_TTL_PER_TYPE: ttlPerType().optional().register(variableDocs, {
    unset: 'unset: `RESPONSE_CACHE_TTL_MS` for every type',
    description:
      'shorter or longer TTLs by the types an answer holds, e.g. `Permission=300000,Head=60000`: an answer lives as long as the shortest of its types allows (0: never kept)',
  }),
  RESPONSE_CACHE_MAX_ENTRIES: setting(
    'responseCache.bounds.maxEntries',
    integer(1, 10_000_000).default(10_000),
  ).register(variableDocs, {
    description:
      "answers the response cache keeps in each process's memory (without `REDIS_URL`), the least recently used dropped first",
  }),
  RESPONSE_CACHE_MAX_BYTES: setting(
    'responseCache.bounds.maxBytes',
    integer(1_024, 17_179_869_184).default(64 * mib),
  ).register(variableDocs, {
    description:
      "what the kept answers may weigh together, estimated: in each process's memory (about 2.4 bytes a byte of their JSON, and 350 bytes an object they hold; an answer weighing more than an eighth of it is not kept), or in Redis for all replicas together (their keys, values and index entries; past it an answer is not stored until older ones expire; see [Redis memory](docs/response-cache.md#redis-memory))",
  }),
  RESPONSE_CACHE_STALE_IF_ERROR_MS: setting('responseCache.staleIfErrorMs', integer(0, 86_400_000).default(0)).register(
    variableDocs,
    {
      description:
        "how long past its TTL a kept answer may still be served, marked stale, when its read fails with an upstream fault (5xx, a timeout, no connection, an open breaker); never across callers, never after a write evicted it, never for a mutation (RFC 5861's `stale-if-error`); 0: off (see [stale answers](docs/response-cache.md#stale-answers-on-failure))",
    },
  ),
  RESPONSE_CACHE_CALLER_SHARE: openRatio().default(0.1).register(variableDocs, {
    description:
      'the share of `RESPONSE_CACHE_MAX_BYTES` the answers of one caller (bearer token, or the public scope without one) may weigh, and those kept for one client address whatever tokens it sent: in memory its own oldest answers make room, in Redis its answers are not stored until older ones expire',
  }),
  RESPONSE_CACHE_MAX_ENTRY_BYTES: setting(
    'responseCache.maxEntryBytes',
    integer(1_024, 1_073_741_824).default(mib),
  ).register(variableDocs, {
    description:
      'bytes of JSON of the largest answer the response cache keeps, in process memory or in Redis; a larger one is executed each time',
  }),
  METRICS_OPERATION_NAMES: setting('metricsOperations.max', integer(1, 100_000).default(500)).register(variableDocs, {
    description:
      "operation names `/metrics` keeps apart besides the known ones (the manifest's, `METRICS_KNOWN_OPERATIONS`): the first seen; the rest are `other`",
  }),
  METRICS_KNOWN_OPERATIONS: names(/^[_A-Za-z][_0-9A-Za-z]*$/, 'a comma-separated list of GraphQL operation names')
    .optional()
    .register(variableDocs, {
      unset: 'none',
      description:
        "operation names `/metrics` always keeps apart, beside the trusted-documents manifest's; the others share `METRICS_OPERATION_NAMES`",
    }),
  METRICS_CLIENT_NAMES: setting('metricsClients.maxNames', integer(1, 10_000).default(50)).register(variableDocs, {
    description:
      'client app names (`apollographql-client-name` or `graphql-client-name`) `/metrics` keeps apart, the first seen; the rest are `other` (see [client awareness](docs/operations.md#client-awareness))',
  }),
  METRICS_KNOWN_CLIENTS: names(
    /^[\w .:/@+()-]{1,64}$/,
    'a comma-separated list of client app names (letters, digits, space and _ . : / @ + ( ) -, at most 64 each)',
  )
    .optional()
    .register(variableDocs, {
      unset: 'none',
      description: 'client app names `/metrics` always keeps apart; the others share `METRICS_CLIENT_NAMES`',
    }),
  METRICS_CLIENT_VERSIONS: setting('metricsClients.maxVersions', integer(1, 1_000).default(10)).register(variableDocs, {
    description: 'client versions `/metrics` keeps apart under each client name, the first seen; the rest are `other`',
  }),
  METRICS_SCHEMA_USAGE: setting('schemaUsage', flag().default(true)).register(variableDocs, {
    description:
      "count the schema coordinates each operation selects, by client (`gateway_schema_coordinate_uses_total`, what `npm run schema:check -- --usage` reads), and log a client's use of a `@deprecated` field or argument at most once a minute; `false`: neither (see [schema usage](docs/operations.md#schema-usage))",
  }),
  INTROSPECTION: flag().optional().register(variableDocs, {
    unset: 'on, off when `NODE_ENV=production`',
    description: 'serve introspection, and GraphiQL, which needs it',
  }),
  CORS_ORIGINS: origins().optional().register(variableDocs, {
    unset: 'unset: same-origin only',
    description: 'origins allowed to call from browsers, or `*` for any',
  }),
  CSRF_PREVENTION: setting('csrfPrevention', flag().default(false)).register(variableDocs, {
    description:
      "`true`: a GET, or a POST with a form or `text/plain` content type, must carry a header a browser only sends cross-site after a CORS preflight (HTTP 403 otherwise). Turn it on when something in front makes a browser's ambient credentials (cookies, HTTP Basic, a client certificate) into the `Authorization` the gateway forwards; see [GET and CSRF](docs/clients.md#get-and-csrf)",
  }),
  PLANNER: oneOf(['on', 'off']).default('on').register(variableDocs, {
    description:
      'pick upstream reads by what the operation selects (see [the planner](docs/architecture.md#the-planner)); `off` for an upstream whose Get Heads and Get Heads Ext do not list the same collection in the same order',
  }),
  COMPILED_EXECUTION: oneOf(['on', 'off']).default('on').register(variableDocs, {
    description:
      "compile hot queries with graphql-jit, those it answers exactly as graphql-js does (see [compiled execution](docs/performance.md#compiled-execution)); `off` runs every operation on the interpreter (graphql-tools' executor)",
  }),
  COMPILED_EXECUTION_AT_RUN: setting('compiledQueries.afterExecutions', integer(1, 1_000).default(2)).register(
    variableDocs,
    {
      description:
        'the run of a query at which it is compiled, and from which it runs compiled: at its second, a one-off document never pays for a compilation; 1 compiles every query at once',
    },
  ),
  COMPILED_EXECUTION_MAX_FIELDS: setting('compiledQueries.maxFields', integer(1, 100_000).default(200)).register(
    variableDocs,
    {
      description:
        'largest query compiled, in field selections with its fragments spread out (compiling one of a thousand takes tens of milliseconds); a larger one stays interpreted',
    },
  ),
  COMPILED_EXECUTION_MAX_ENTRIES: setting('compiledDocuments.maxEntries', integer(1, 1_000_000).default(500)).register(
    variableDocs,
    { description: 'compiled queries kept, the least recently used dropped first' },
  ),
  COMPILED_EXECUTION_MAX_BYTES: setting(
    'compiledDocuments.maxBytes',
    integer(mib, 16 * 1024 * mib).default(48 * mib),
  ).register(variableDocs, {
    description:
      'estimated heap the compiled queries kept may hold together (about 8 KB a field selection; a query larger than this stays interpreted). See [memory](docs/operations.md#memory)',
  }),
  DOCUMENT_CACHE_MAX_ENTRIES: setting('documentCache.maxEntries', integer(1, 1_000_000).default(1_000)).register(
    variableDocs,
    {
      description:
        "query texts whose prepared document is kept (parsed and validated with every document policy, or the refusal it met), the least recently used dropped first; what else is kept per document (its plan's shape, compiled execution's count of its runs) goes with it",
    },
  ),
  DOCUMENT_CACHE_MAX_BYTES: setting('documentCache.maxBytes', integer(mib, 16 * 1024 * mib).default(32 * mib)).register(
    variableDocs,
    {
      description: 'estimated heap those prepared documents may hold together (about 0.5 KB a token, besides the text)',
    },
  ),
  WORKERS: setting(
    'workers',
    workers()
      .default(1)
      .transform((value) => (value === 'auto' ? availableParallelism() : value)),
  ).register(variableDocs, { description: 'gateway processes behind one port (`node:cluster`); `auto`: one per CPU' }),
  SUBSCRIPTIONS_PER_CALLER: setting('subscriptions.perCaller', integer(1, 100_000).default(100)).register(
    variableDocs,
    {
      description:
        'subscriptions one caller (its token once known to be real, else its address) may hold open in one process, over every transport; one more is refused `SUBSCRIPTION_LIMIT` (see [real time](docs/operations.md#real-time))',
    },
  ),
  SUBSCRIPTIONS_MAX: setting('subscriptions.max', integer(1, 1_000_000).default(20_000)).register(variableDocs, {
    description:
      'subscriptions one process holds open for every caller together; one more is refused `SUBSCRIPTION_LIMIT`',
  }),
  SUBSCRIPTION_WATCHED_HEADS_PER_CALLER: setting(
    'subscriptions.watchedPerCaller',
    integer(1, 1_000_000).default(2_000),
  ).register(variableDocs, {
    description:
      "heads one caller's subscriptions and live queries may watch together in one process (a subscription one, a live query the heads it read); one more is refused `SUBSCRIPTION_LIMIT` (a live query whose re-run reads more ends with it)",
  }),
  SUBSCRIPTION_WATCHED_HEADS_MAX: setting('subscriptions.watchedMax', integer(1, 10_000_000).default(200_000)).register(
    variableDocs,
    {
      description:
        'heads the subscriptions and live queries of one process may watch together; past half of it, no caller more than its fair share',
    },
  ),
  SUBSCRIPTION_EVENT_CONCURRENCY: setting('subscriptions.eventConcurrency', integer(1, 10_000).default(32)).register(
    variableDocs,
    {
      description:
        "events one process resolves at once (each a read of its subscribers' selection): a write's fan-out to many live queries waits its turn instead of taking the upstream pool",
    },
  ),
  SUBSCRIPTION_EVENT_CONCURRENCY_PER_CALLER: setting(
    'subscriptions.eventConcurrencyPerCaller',
    integer(1, 10_000).default(4),
  ).register(variableDocs, {
    description: "of those, one caller's at once: the others' events are resolved between them",
  }),
  SUBSCRIPTION_POLL_MS: setting('subscriptions.pollMs', integer(0, 3_600_000).default(5_000)).register(variableDocs, {
    description:
      'how often each head a subscription or live query watches is read for changes made outside the gateway: one read per head per interval for the whole fleet (a lease in Redis with `REDIS_URL`); 0: never (only writes through the gateway are seen)',
  }),
  SUBSCRIPTION_POLL_CONCURRENCY: setting('subscriptions.pollConcurrency', integer(1, 256).default(4)).register(
    variableDocs,
    { description: "polling's reads under way at once at most, per process: its share of the upstream pool" },
  ),
  SUBSCRIPTION_REPLAY_MS: setting('subscriptions.replayMs', integer(0, 3_600_000).default(60_000)).register(
    variableDocs,
    {
      description:
        'how long the changes of each head are kept (in Redis with `REDIS_URL`) for an SSE client that reconnects with `Last-Event-ID`: it is sent what it missed, from any replica; 0: none kept (a reconnecting client is sent the head as it is now)',
    },
  ),
  SUBSCRIPTION_LIVE_THROTTLE_MS: setting('subscriptions.liveThrottleMs', integer(0, 600_000).default(1_000)).register(
    variableDocs,
    {
      description:
        'a live query (`@live`) is sent again at most this often: the changes that come meanwhile are sent together, as the result after them',
    },
  ),
  WEBSOCKET_MAX_OPERATIONS: setting('websocket.maxOperations', integer(1, 100_000).default(100)).register(
    variableDocs,
    {
      description:
        'operations (subscriptions, queries) one WebSocket may have open at once; one more closes the socket with 4413 and a log line',
    },
  ),
  WEBSOCKET_MAX_MESSAGES_PER_SECOND: setting(
    'websocket.maxMessagesPerSecond',
    integer(1, 1_000_000).default(200),
  ).register(variableDocs, {
    description:
      'messages (pings included) one WebSocket may send a second; one more closes the socket with 1008 (policy violation) and a log line',
  }),
  SUBSCRIPTION_HEARTBEAT_MS: setting('subscriptions.heartbeatMs', integer(100, 10_000).default(8_000)).register(
    variableDocs,
    {
      description:
        'how often an idle stream gets a heartbeat (an SSE comment, an empty multipart part, a WebSocket ping): at most 10 s, so proxies keep idle streams',
    },
  ),
  SHUTDOWN_DELAY_MS: setting('shutdown.delayMs', integer(0, 600_000).default(5_000)).register(variableDocs, {
    description:
      'after SIGTERM, how long `/ready` answers 503 while both ports go on serving as before, so the load balancer stops sending before connections close (Kubernetes takes a pod out of its Service as it sends SIGTERM; HAProxy needs its check interval × `fall`); then the graceful stop. 5 s covers an endpoint update and a few probe periods; SIGINT, or a second signal, skips it (see [rollouts](docs/deploy.md#rollouts))',
  }),
  SHUTDOWN_GRACE_MS: setting('shutdown.graceMs', integer(0, 600_000).default(10_000)).register(variableDocs, {
    description:
      'then, how long in-flight requests may finish (the listeners closed, every answer with `Connection: close`); those still running are cut',
  }),
  HEADERS_TIMEOUT_MS: setting('connections.headersTimeoutMs', integer(100, 600_000).default(10_000)).register(
    variableDocs,
    {
      description:
        'a connection that has not sent a whole request head in this time is answered 408 and closed; at most `REQUEST_TIMEOUT_MS` (see [connections](docs/operations.md#connections))',
    },
  ),
  REQUEST_TIMEOUT_MS: setting('connections.requestTimeoutMs', integer(100, 3_600_000).default(30_000)).register(
    variableDocs,
    {
      description:
        "the same for a whole request, head and body (the answer's own time is bounded by `OPERATION_TIMEOUT_MS`)",
    },
  ),
  MAX_CONNECTIONS: integer(1, 10_000_000)
    .optional()
    .register(variableDocs, {
      unset: `the file-descriptor limit less \`UPSTREAM_CONNECTIONS\` (twice with the embedded upstream) and ${RESERVED_DESCRIPTORS}`,
      description:
        'client connections one process holds at once; one more is closed as it arrives and counted in `gateway_connections_dropped_total`',
    }),
  ADMIN_PORT: setting('connections.adminPort', integer(0, 65_535).optional()).register(variableDocs, {
    unset: 'unset: none',
    description:
      'a second port, on `HOST`, serving only `/health`, `/ready` and `/metrics`, so probes are answered while the public port is full; 0: any free port',
  }),
  LOG_LEVEL: setting(
    'logLevel',
    oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ).register(variableDocs, { description: "pino's level: what is logged" }),
  OPERATION_LOG: setting('operationLog.which', oneOf(['failures', 'all', 'off']).default('failures')).register(
    variableDocs,
    {
      description:
        'which GraphQL operations get a `graphql operation` log line (at `info`): `failures`, those refused, failed or slower than `OPERATION_LOG_SLOW_MS` (not those open upstream breakers refused whole); `all`, every one; `off`, none. The metrics and spans count every operation whatever this says (see [logs](docs/operations.md#logs))',
    },
  ),
  OPERATION_LOG_SLOW_MS: setting('operationLog.slowMs', integer(0, 3_600_000).default(1_000)).register(variableDocs, {
    description:
      'with `OPERATION_LOG=failures`, an operation that took this long or longer is logged even when it succeeded',
  }),
  NODE_ENV: expecting(z.string(), 'any text').optional().register(variableDocs, {
    unset: 'unset',
    description:
      '`production`: refuses to start without `UPSTREAM_URL`, hides field suggestions, introspection off by default',
  }),
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl('an http(s) URL of an OTLP/HTTP receiver').optional().register(variableDocs, {
    unset: 'unset: no spans recorded',
    description:
      'OTLP/HTTP receiver (a collector) for traces; spans go to `<endpoint>/v1/traces` (see [tracing](docs/operations.md#tracing))',
  }),
  // The spec's default; grpc would need another exporter (and HTTP/2), not offered.
  OTEL_EXPORTER_OTLP_PROTOCOL: setting(
    'tracing.protocol',
    oneOf(['http/protobuf', 'http/json']).default('http/protobuf'),
  ).register(variableDocs, { description: 'how spans are encoded for the receiver (grpc is not offered)' }),
  OTEL_SERVICE_NAME: setting(
    'tracing.serviceName',
    expecting(z.string(), 'any text').default('avatar-head-gateway'),
  ).register(variableDocs, { description: 'the `service.name` of the spans' }),
  OTEL_TRACES_SAMPLER: setting('tracing.sampler', oneOf(samplerNames).default('parentbased_always_on')).register(
    variableDocs,
    { description: "which traces are recorded, by the OpenTelemetry SDK's samplers" },
  ),
  OTEL_TRACES_SAMPLER_ARG: setting('tracing.samplerRatio', ratio().default(1)).register(variableDocs, {
    description: 'the ratio of the `traceidratio` samplers',
  }),
});

export type Environment = z.infer<typeof environment>;
