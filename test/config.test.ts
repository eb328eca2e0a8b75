import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { descriptorLimit, FALLBACK_DESCRIPTOR_LIMIT } from '../src/config/descriptors.js';
import { ConfigError, loadConfig, maxConnectionsFor } from '../src/config.js';
import { defaultRoutes } from '../src/upstream/routes.js';

const jsonDir = mkdtempSync(join(tmpdir(), 'config-'));
afterAll(() => rmSync(jsonDir, { recursive: true, force: true }));
let jsonFiles = 0;
const jsonFile = (content: string) => {
  const file = join(jsonDir, `config-${++jsonFiles}.json`);
  writeFileSync(file, content);
  return file;
};

describe('loadConfig', () => {
  it('applies the defaults', () => {
    expect(loadConfig({})).toEqual({
      upstreamUrl: undefined,
      port: 4000,
      host: '127.0.0.1',
      upstreamTimeoutMs: 10_000,
      upstreamConnections: 100,
      routes: defaultRoutes,
      upstreamKeepAliveMs: 4_000,
      upstreamMaxResponseBytes: 5 * 1024 * 1024,
      upstreamFanout: 10,
      upstreamCallBudget: 100,
      resilience: {
        breaker: { failureRatio: 0.5, window: 20, minimumCalls: 10, resetMs: 5_000 },
        retryBudget: { ratio: 0.2, minPerSecond: 10 },
        dedupe: true,
      },
      maxResultItems: 1_000,
      maxResponseBytes: 4 * 1024 * 1024,
      operationTimeoutMs: 15_000,
      introspection: true,
      planner: 'selection',
      compiledExecution: true,
      compiledQueries: { afterExecutions: 2, maxFields: 200 },
      compiledDocuments: { maxEntries: 500, maxBytes: 48 * 1024 * 1024 },
      documentCache: { maxEntries: 1_000, maxBytes: 32 * 1024 * 1024 },
      corsOrigins: [],
      csrfPrevention: false,
      limits: {
        maxDepth: 15,
        maxAliases: 30,
        maxTokens: 2_000,
        maxDirectives: 20,
        maxRepeatedFields: 10,
        maxFragmentPairs: 5_000,
        maxVariablesDepth: 100,
        maxBodyBytes: 100_000,
      },
      maxBatch: 10,
      persistedDocuments: {
        apqMaxEntries: 1_000,
        apqMaxBytes: 5_000_000,
        apqCallerShare: 0.25,
        apqTtlSeconds: 10_800,
        trustedDocuments: undefined,
        trustedDocumentsOnly: false,
      },
      compressionMinBytes: 1_024,
      shutdown: { delayMs: 5_000, graceMs: 10_000 },
      statusPage: { on: true, public: false },
      subscriptions: {
        perCaller: 100,
        max: 20_000,
        watchedPerCaller: 2_000,
        watchedMax: 200_000,
        eventConcurrency: 32,
        eventConcurrencyPerCaller: 4,
        pollMs: 5_000,
        pollConcurrency: 4,
        replayMs: 60_000,
        liveThrottleMs: 1_000,
        heartbeatMs: 8_000,
      },
      websocket: { maxOperations: 100, maxMessagesPerSecond: 200 },
      logins: { perAccountPerMinute: 10, perAddressPerMinute: 60 },
      // MAX_CONNECTIONS: this process's descriptor limit, less the pool twice (the embedded upstream's too) and the
      // reserve.
      connections: {
        headersTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        maxConnections: descriptorLimit() - 2 * 100 - 96,
        adminPort: undefined,
        adminMaxConnections: 32,
      },
      callerLimits: {
        requestsPerSecond: undefined,
        upstreamCallsPerSecond: undefined,
        inFlight: undefined,
        addressRequestsPerSecond: undefined,
        windowSeconds: 2,
        trustProxy: false,
      },
      knownTokens: { ttlMs: 3_600_000, max: 100_000 },
      loadShedding: { maxInFlight: 100, eventLoopDelayMs: 250, maxUpstreamQueued: 10, retryAfterSeconds: 1 },
      responseCache: undefined,
      redis: undefined,
      metricsOperations: { known: new Set(), max: 500 },
      operationLog: { which: 'failures', slowMs: 1000 },
      metricsClients: { knownNames: new Set(), maxNames: 50, maxVersions: 10 },
      schemaUsage: true,
      workers: 1,
      logLevel: 'info',
      production: false,
      tracing: {
        tracesUrl: undefined,
        protocol: 'http/protobuf',
        serviceName: 'avatar-head-gateway',
        sampler: 'parentbased_always_on',
        samplerRatio: 1,
      },
    });
  });

  it('turns introspection off in production unless INTROSPECTION says otherwise, and reads CORS origins', () => {
    expect(loadConfig({ NODE_ENV: 'production', UPSTREAM_URL: 'http://u/v2' }).introspection).toBe(false);
    expect(loadConfig({ NODE_ENV: 'production', INTROSPECTION: 'true' }).introspection).toBe(true);
    expect(loadConfig({ INTROSPECTION: 'off' }).introspection).toBe(false);
    expect(loadConfig({ WORKERS: 'auto' }).workers).toBeGreaterThanOrEqual(1);
    expect(loadConfig({ PLANNER: 'off' }).planner).toBe('plain');
    expect(loadConfig({ COMPILED_EXECUTION: 'off' }).compiledExecution).toBe(false);
    // The in-flight cap follows the upstream pool unless set, the pool's queue one operation's fan-out; 0 turns each
    // threshold off.
    expect(loadConfig({ UPSTREAM_CONNECTIONS: '10', UPSTREAM_FANOUT: '4' }).loadShedding).toMatchObject({
      maxInFlight: 10,
      maxUpstreamQueued: 4,
    });
    expect(
      loadConfig({
        UPSTREAM_CONNECTIONS: '10',
        SHED_MAX_IN_FLIGHT: '0',
        SHED_EVENT_LOOP_DELAY_MS: '0',
        SHED_MAX_UPSTREAM_QUEUED: '0',
        SHED_RETRY_AFTER_SECONDS: '5',
      }).loadShedding,
    ).toEqual({ maxInFlight: 0, eventLoopDelayMs: 0, maxUpstreamQueued: 0, retryAfterSeconds: 5 });
    expect(loadConfig({ COMPILED_EXECUTION_AT_RUN: '1', COMPILED_EXECUTION_MAX_FIELDS: '40' }).compiledQueries).toEqual(
      { afterExecutions: 1, maxFields: 40 },
    );
    expect(
      loadConfig({ COMPILED_EXECUTION_MAX_ENTRIES: '20', COMPILED_EXECUTION_MAX_BYTES: '2097152' }).compiledDocuments,
    ).toEqual({ maxEntries: 20, maxBytes: 2_097_152 });
    expect(
      loadConfig({ DOCUMENT_CACHE_MAX_ENTRIES: '100', DOCUMENT_CACHE_MAX_BYTES: '8388608' }).documentCache,
    ).toEqual({ maxEntries: 100, maxBytes: 8_388_608 });
    expect(loadConfig({ CORS_ORIGINS: 'https://app.example.com/, http://localhost:5173' }).corsOrigins).toEqual([
      'https://app.example.com',
      'http://localhost:5173',
    ]);
    expect(loadConfig({ CSRF_PREVENTION: 'true' }).csrfPrevention).toBe(true);
  });

  it('reads every variable, and drops a trailing slash from the upstream URL', () => {
    const config = loadConfig({
      UPSTREAM_URL: 'https://heads.example.com/api/v2/',
      PORT: '8080',
      HOST: '0.0.0.0',
      UPSTREAM_TIMEOUT_MS: '2500',
      UPSTREAM_CONNECTIONS: '8',
      UPSTREAM_ROUTES_FILE: jsonFile(
        '{"getHeadExt": {"path": "/heads/{head_id}/extended"}, "updateHead": {"method": "PUT"}}',
      ),
      NODE_ENV: 'production',
    });
    expect(config).toMatchObject({
      upstreamUrl: 'https://heads.example.com/api/v2',
      port: 8080,
      host: '0.0.0.0',
      upstreamTimeoutMs: 2500,
      upstreamConnections: 8,
      production: true,
    });
    expect(config.routes.getHeadExt).toEqual({ method: 'GET', path: '/heads/{head_id}/extended' });
    expect(config.routes.updateHead).toEqual({ method: 'PUT', path: '/heads/{head_id}' });
    expect(config.routes.listHeads).toEqual(defaultRoutes.listHeads);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reads the client protocol variables: batch size, APQ store bounds, trusted documents, compression threshold', () => {
    const manifest = jsonFile(
      JSON.stringify({ 'sha256:abc123': 'query A { __typename }', md5only: 'query B { __typename }' }),
    );
    const config = loadConfig({
      MAX_BATCH: '3',
      APQ_MAX_ENTRIES: '50',
      APQ_MAX_BYTES: '65536',
      TRUSTED_DOCUMENTS_FILE: manifest,
      TRUSTED_DOCUMENTS_ONLY: 'true',
      COMPRESSION_MIN_BYTES: '0',
    });
    expect(config).toMatchObject({
      maxBatch: 3,
      compressionMinBytes: 0,
      persistedDocuments: { apqMaxEntries: 50, apqMaxBytes: 65_536, trustedDocumentsOnly: true },
    });
    // An id `sha256:<hex>` also answers to the bare hex (Apollo's sha256Hash); other ids as written.
    expect(Object.fromEntries(config.persistedDocuments.trustedDocuments!)).toEqual({
      'sha256:abc123': 'query A { __typename }',
      abc123: 'query A { __typename }',
      md5only: 'query B { __typename }',
    });
    expect(loadConfig({ TRUSTED_DOCUMENTS_FILE: manifest }).persistedDocuments.trustedDocumentsOnly).toBe(false);
  });

  it('reads the abuse-resistance variables: per-caller limits, the proxy, Redis, the APQ lifetime and the metric names', () => {
    const config = loadConfig({
      RATE_LIMIT_REQUESTS_PER_SECOND: '20',
      RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '50',
      RATE_LIMIT_IN_FLIGHT: '4',
      RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: '100',
      TRUST_PROXY: 'true',
      REDIS_URL: 'redis://:secret@127.0.0.1:6390/2',
      APQ_TTL_SECONDS: '3600',
      METRICS_OPERATION_NAMES: '50',
      METRICS_CLIENT_NAMES: '5',
      METRICS_KNOWN_OPERATIONS: 'HeadPage, Login',
      METRICS_KNOWN_CLIENTS: 'web-app,@acme/ios (14)',
      METRICS_CLIENT_VERSIONS: '3',
      RATE_LIMIT_WINDOW_SECONDS: '5',
    });
    expect(config).toMatchObject({
      callerLimits: {
        requestsPerSecond: 20,
        upstreamCallsPerSecond: 50,
        inFlight: 4,
        addressRequestsPerSecond: 100,
        windowSeconds: 5,
        trustProxy: true,
      },
      redis: { topology: { kind: 'node', url: 'redis://:secret@127.0.0.1:6390/2' }, sentinelPassword: undefined },
      persistedDocuments: { apqTtlSeconds: 3_600 },
      metricsOperations: { known: new Set(['HeadPage', 'Login']), max: 50 },
      metricsClients: { knownNames: new Set(['web-app', '@acme/ios (14)']), maxNames: 5, maxVersions: 3 },
    });
  });

  it.each([
    ['redis://cache:6379/2', { kind: 'node', url: 'redis://cache:6379/2' }],
    ['rediss://user:pw@cache:6380', { kind: 'node', url: 'rediss://user:pw@cache:6380' }],
    [
      'redis-sentinel://:p%40ss@10.0.0.1:26379,10.0.0.2,[::1]:26380/gw-master',
      {
        kind: 'sentinel',
        sentinels: [
          { host: '10.0.0.1', port: 26_379 },
          { host: '10.0.0.2', port: 26_379 },
          { host: '::1', port: 26_380 },
        ],
        masterName: 'gw-master',
        credentials: { username: undefined, password: 'p@ss' },
        tls: false,
      },
    ],
    [
      'rediss-sentinel://sentinel-0/mymaster',
      {
        kind: 'sentinel',
        sentinels: [{ host: 'sentinel-0', port: 26_379 }],
        masterName: 'mymaster',
        credentials: {},
        tls: true,
      },
    ],
    [
      'redis-cluster://gateway:secret@node-1:7000,node-2:7001,node-3',
      {
        kind: 'cluster',
        nodes: [
          { host: 'node-1', port: 7000 },
          { host: 'node-2', port: 7001 },
          { host: 'node-3', port: 6379 },
        ],
        credentials: { username: 'gateway', password: 'secret' },
        tls: false,
      },
    ],
    [
      'rediss-cluster://node-1:7000/',
      { kind: 'cluster', nodes: [{ host: 'node-1', port: 7000 }], credentials: {}, tls: true },
    ],
  ])('reads REDIS_URL %s as its topology', (url, topology) => {
    expect(loadConfig({ REDIS_URL: url }).redis).toEqual({ topology, sentinelPassword: undefined });
  });

  it('reads TRUST_PROXY as Express reads trust proxy: none, every hop, the nearest N, or addresses, subnets and named ranges', () => {
    const trust = (value: string) => loadConfig({ TRUST_PROXY: value }).callerLimits.trustProxy;
    expect([trust('false'), trust('off'), trust('0'), trust('true'), trust('on'), trust('1'), trust('2')]).toEqual([
      false,
      false,
      false,
      true,
      true,
      1,
      2,
    ]);
    expect(trust(' loopback, 10.0.0.0/8 ,192.0.2.7')).toEqual(['loopback', '10.0.0.0/8', '192.0.2.7']);
  });

  it("reads the Sentinels' own password beside a redis-sentinel:// URL, and the shutdown delay and grace", () => {
    expect(
      loadConfig({ REDIS_URL: 'redis-sentinel://s1/m', REDIS_SENTINEL_PASSWORD: 's3cret' }).redis?.sentinelPassword,
    ).toBe('s3cret');
    expect(loadConfig({ SHUTDOWN_DELAY_MS: '0', SHUTDOWN_GRACE_MS: '2500' }).shutdown).toEqual({
      delayMs: 0,
      graceMs: 2_500,
    });
  });

  it.each([
    [{ RATE_LIMIT_REQUESTS_PER_SECOND: '0' }, /^RATE_LIMIT_REQUESTS_PER_SECOND: expected an integer from 1/],
    [
      { CIRCUIT_BREAKER_FAILURE_RATIO: '1' },
      /^CIRCUIT_BREAKER_FAILURE_RATIO: expected a number between 0 and 1, both excluded, got "1"$/,
    ],
    [
      { CIRCUIT_BREAKER_MIN_CALLS: '21' },
      /^CIRCUIT_BREAKER_MIN_CALLS: expected at most CIRCUIT_BREAKER_WINDOW \(20\), got "21"$/,
    ],
    [{ UPSTREAM_DEDUPE: 'maybe' }, /^UPSTREAM_DEDUPE: expected true or false/],
    [{ UPSTREAM_RETRY_BUDGET_RATIO: '2' }, /^UPSTREAM_RETRY_BUDGET_RATIO: expected a ratio from 0 to 1/],
    [{ RATE_LIMIT_IN_FLIGHT: '1.5' }, /^RATE_LIMIT_IN_FLIGHT: expected an integer from 1/],
    [
      { RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: '0' },
      /^RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: expected an integer from 1/,
    ],
    [
      { RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '49' },
      /^RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: expected at least 50, so that one operation's UPSTREAM_CALL_BUDGET \(100\) fits in a burst of RATE_LIMIT_WINDOW_SECONDS \(2\), got "49"$/,
    ],
    [
      { RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '19', RATE_LIMIT_WINDOW_SECONDS: '5' },
      /^RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: expected at least 20, .* RATE_LIMIT_WINDOW_SECONDS \(5\), got "19"$/,
    ],
    [{ RATE_LIMIT_WINDOW_SECONDS: '0' }, /^RATE_LIMIT_WINDOW_SECONDS: expected an integer from 1 to 3600, got "0"$/],
    [{ TRUST_PROXY: 'yes' }, /^TRUST_PROXY: expected true, false, a number of proxies, or their addresses/],
    [{ TRUST_PROXY: '10.0.0.0/33' }, /^TRUST_PROXY: expected true, false, a number of proxies, or their addresses/],
    [{ METRICS_OPERATION_NAMES: '0' }, /^METRICS_OPERATION_NAMES: expected an integer from 1/],
    [{ METRICS_CLIENT_NAMES: '0' }, /^METRICS_CLIENT_NAMES: expected an integer from 1/],
    [
      { METRICS_KNOWN_OPERATIONS: 'Head-Page' },
      /^METRICS_KNOWN_OPERATIONS: expected a comma-separated list of GraphQL operation names/,
    ],
    [
      { METRICS_KNOWN_CLIENTS: 'web\tapp' },
      /^METRICS_KNOWN_CLIENTS: expected a comma-separated list of client app names/,
    ],
    [{ METRICS_CLIENT_VERSIONS: 'all' }, /^METRICS_CLIENT_VERSIONS: expected an integer from 1/],
    [
      { DOCUMENT_CACHE_MAX_ENTRIES: '0' },
      /^DOCUMENT_CACHE_MAX_ENTRIES: expected an integer from 1 to 1000000, got "0"$/,
    ],
    [
      { DOCUMENT_CACHE_MAX_BYTES: '64k' },
      /^DOCUMENT_CACHE_MAX_BYTES: expected an integer from 1048576 to 17179869184, got "64k"$/,
    ],
    [
      { COMPILED_EXECUTION_MAX_ENTRIES: '-1' },
      /^COMPILED_EXECUTION_MAX_ENTRIES: expected an integer from 1 to 1000000/,
    ],
    [
      { COMPILED_EXECUTION_MAX_BYTES: '1000' },
      /^COMPILED_EXECUTION_MAX_BYTES: expected an integer from 1048576 to 17179869184, got "1000"$/,
    ],
    // A Redis URL may hold a password: never echoed.
    [
      { REDIS_URL: 'http://:hunter2@cache:6379' },
      /^REDIS_URL: expected a redis:\/\/, rediss:\/\/, redis-sentinel:\/\/HOST:PORT\[,HOST:PORT…\]\/MASTER or redis-cluster:\/\/HOST:PORT\[,HOST:PORT…\] URL \(rediss-… for TLS\), got something else$/,
    ],
    [{ REDIS_URL: 'redis-sentinel://:hunter2@s1:26379,s2:26379' }, /^REDIS_URL: expected .*, got something else$/],
    [{ REDIS_URL: 'redis-cluster://:hunter2@n1:6379,n2:99999' }, /^REDIS_URL: expected .*, got something else$/],
    [{ REDIS_URL: 'redis-cluster://:hunter2@n1:6379/mymaster' }, /^REDIS_URL: expected .*, got something else$/],
    [{ REDIS_URL: 'redis-sentinel://:hun%ter2@s1/mymaster' }, /^REDIS_URL: expected .*, got something else$/],
    [
      { REDIS_URL: 'redis://cache:6379', REDIS_SENTINEL_PASSWORD: 'hunter2' },
      /^REDIS_SENTINEL_PASSWORD: expected a redis-sentinel:\/\/ \(or rediss-sentinel:\/\/\) REDIS_URL beside it, got a password without Sentinels$/,
    ],
  ])('refuses the abuse-resistance value %o with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it.each([
    [{ MAX_BATCH: '0' }, /^MAX_BATCH: expected an integer from 1 to 100, got "0"$/],
    [{ MAX_RESULT_ITEMS: '0' }, /^MAX_RESULT_ITEMS: expected an integer from 1 to 1000000, got "0"$/],
    [{ MAX_RESPONSE_BYTES: '100' }, /^MAX_RESPONSE_BYTES: expected an integer from 1024/],
    [{ MAX_BATCH: '101' }, /^MAX_BATCH: expected an integer from 1 to 100/],
    [{ APQ_MAX_ENTRIES: '0' }, /^APQ_MAX_ENTRIES: expected an integer from 1 to 1000000/],
    [{ APQ_MAX_BYTES: '10' }, /^APQ_MAX_BYTES: expected an integer from 1024/],
    [{ COMPRESSION_MIN_BYTES: '-1' }, /^COMPRESSION_MIN_BYTES: expected an integer from 0/],
    [{ TRUSTED_DOCUMENTS_ONLY: 'yes' }, /^TRUSTED_DOCUMENTS_ONLY: expected true or false/],
    [
      { TRUSTED_DOCUMENTS_ONLY: 'true' },
      /^TRUSTED_DOCUMENTS_ONLY: expected TRUSTED_DOCUMENTS_FILE to name the manifest of trusted documents, got "true" without one$/,
    ],
    [
      { TRUSTED_DOCUMENTS_FILE: '/no/such/manifest.json' },
      /^TRUSTED_DOCUMENTS_FILE: cannot read a JSON object from \/no\/such\/manifest.json/,
    ],
    [
      { TRUSTED_DOCUMENTS_FILE: jsonFile('{}') },
      /^TRUSTED_DOCUMENTS_FILE: expected a JSON object of document ids to GraphQL documents/,
    ],
    [
      { TRUSTED_DOCUMENTS_FILE: jsonFile('{"sha256:abc": 42}') },
      /^TRUSTED_DOCUMENTS_FILE: expected a JSON object of document ids to GraphQL documents/,
    ],
    // The subgraph's path may not shadow one of the gateway's own, nor be relative or end in a slash.
    [{ SUBGRAPH_PATH: '/graphql' }, /^SUBGRAPH_PATH: expected a path such as \/subgraph \(none of \/, \/graphql,/],
    [{ SUBGRAPH_PATH: '/status/subgraph' }, /^SUBGRAPH_PATH: expected a path such as \/subgraph/],
    [{ SUBGRAPH_PATH: 'subgraph' }, /^SUBGRAPH_PATH: expected a path such as \/subgraph/],
    [{ SUBGRAPH_PATH: '/subgraph/' }, /^SUBGRAPH_PATH: expected a path such as \/subgraph/],
  ])('refuses the client protocol value %o with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('reads the response cache variables: off unless RESPONSE_CACHE_TTL_MS is more than 0', () => {
    expect(
      loadConfig({ RESPONSE_CACHE_TTL_MS: '0', RESPONSE_CACHE_TTL_PER_TYPE: 'Head=1' }).responseCache,
    ).toBeUndefined();
    expect(loadConfig({ RESPONSE_CACHE_TTL_MS: '60000' }).responseCache).toEqual({
      ttlMs: 60_000,
      ttlPerType: {},
      bounds: { maxEntries: 10_000, maxBytes: 64 * 1024 * 1024, callerBytes: Math.floor(6.4 * 1024 * 1024) },
      maxEntryBytes: 1024 * 1024,
      staleIfErrorMs: 0,
    });
    expect(
      loadConfig({
        RESPONSE_CACHE_TTL_MS: '1000',
        RESPONSE_CACHE_TTL_PER_TYPE: ' Permission=300000, SubscriptionType=3600000,Head=0',
        RESPONSE_CACHE_MAX_ENTRIES: '5',
        RESPONSE_CACHE_MAX_BYTES: '2048',
        RESPONSE_CACHE_CALLER_SHARE: '0.5',
        RESPONSE_CACHE_MAX_ENTRY_BYTES: '4096',
        RESPONSE_CACHE_STALE_IF_ERROR_MS: '30000',
      }).responseCache,
    ).toEqual({
      ttlMs: 1_000,
      ttlPerType: { Permission: 300_000, SubscriptionType: 3_600_000, Head: 0 },
      bounds: { maxEntries: 5, maxBytes: 2_048, callerBytes: 1_024 },
      maxEntryBytes: 4_096,
      staleIfErrorMs: 30_000,
    });
  });

  it.each([
    [
      { RESPONSE_CACHE_TTL_MS: 'a minute' },
      /^RESPONSE_CACHE_TTL_MS: expected an integer from 0 to 31536000000, got "a minute"$/,
    ],
    [
      { RESPONSE_CACHE_TTL_PER_TYPE: 'Head' },
      /^RESPONSE_CACHE_TTL_PER_TYPE: expected a comma-separated list of TypeName=milliseconds .*, got "Head"$/,
    ],
    [
      { RESPONSE_CACHE_TTL_PER_TYPE: 'Head=-1' },
      /^RESPONSE_CACHE_TTL_PER_TYPE: expected a comma-separated list of TypeName=milliseconds/,
    ],
    [
      { RESPONSE_CACHE_TTL_PER_TYPE: ',' },
      /^RESPONSE_CACHE_TTL_PER_TYPE: expected a comma-separated list of TypeName=milliseconds/,
    ],
    [
      { RESPONSE_CACHE_TTL_PER_TYPE: 'Head=1,Heads=2,UUID=3' },
      /^RESPONSE_CACHE_TTL_PER_TYPE: expected object type names of the schema \(such as Head, Hair, Permission\), got "Heads", "UUID" in "Head=1,Heads=2,UUID=3"$/,
    ],
    [{ RESPONSE_CACHE_MAX_BYTES: '10' }, /^RESPONSE_CACHE_MAX_BYTES: expected an integer from 1024/],
    [{ RESPONSE_CACHE_MAX_ENTRY_BYTES: '1 MB' }, /^RESPONSE_CACHE_MAX_ENTRY_BYTES: expected an integer from 1024/],
    [
      { RESPONSE_CACHE_CALLER_SHARE: '1' },
      /^RESPONSE_CACHE_CALLER_SHARE: expected a number between 0 and 1, both excluded, got "1"$/,
    ],
  ])('refuses the response cache value %o with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('reads the connection variables', () => {
    const config = loadConfig({
      HEADERS_TIMEOUT_MS: '2000',
      REQUEST_TIMEOUT_MS: '2000',
      MAX_CONNECTIONS: '500',
      ADMIN_PORT: '9000',
    });
    expect(config.connections).toEqual({
      headersTimeoutMs: 2_000,
      requestTimeoutMs: 2_000,
      maxConnections: 500,
      adminPort: 9_000,
      adminMaxConnections: 32,
    });
    // Port 0: any free port, for the admin port as for PORT.
    expect(loadConfig({ PORT: '0', ADMIN_PORT: '0' }).connections.adminPort).toBe(0);
  });

  it('derives MAX_CONNECTIONS from the soft file-descriptor limit, leaving room for the upstream pool and the process', () => {
    const limits = [
      'Limit                     Soft Limit           Hard Limit           Units',
      'Max processes             63423                63423                processes',
      'Max open files            4096                 524288               files',
    ].join('\n');
    expect(descriptorLimit(() => limits)).toBe(4_096);
    // Not Linux (no /proc), or a file without the line: the documented fallback.
    expect(
      descriptorLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBe(FALLBACK_DESCRIPTOR_LIMIT);
    expect(descriptorLimit(() => 'Max processes 100 100 processes')).toBe(1_024);
    expect(maxConnectionsFor(4_096, 100, false)).toBe(4_096 - 100 - 96);
    // The embedded reference upstream serves the pool's connections from this process too.
    expect(maxConnectionsFor(4_096, 100, true)).toBe(4_096 - 200 - 96);
    expect(loadConfig({ UPSTREAM_URL: 'http://u/v2', UPSTREAM_CONNECTIONS: '10' }).connections.maxConnections).toBe(
      descriptorLimit() - 10 - 96,
    );
    expect(() => maxConnectionsFor(1_024, 1_000, false)).toThrow(ConfigError);
    expect(() => maxConnectionsFor(1_024, 1_000, false)).toThrow(
      /^MAX_CONNECTIONS: expected a file-descriptor limit \(ulimit -n\) with room for client connections beside UPSTREAM_CONNECTIONS \(1000\) and 96 for the process, got 1024: raise the limit or lower UPSTREAM_CONNECTIONS$/,
    );
  });

  it.each([
    [{ HEADERS_TIMEOUT_MS: '50' }, /^HEADERS_TIMEOUT_MS: expected an integer from 100 to 600000, got "50"$/],
    [{ HEADERS_TIMEOUT_MS: 'ten' }, /^HEADERS_TIMEOUT_MS: expected an integer from 100/],
    [{ REQUEST_TIMEOUT_MS: '0' }, /^REQUEST_TIMEOUT_MS: expected an integer from 100 to 3600000, got "0"$/],
    [
      { HEADERS_TIMEOUT_MS: '40000' },
      /^HEADERS_TIMEOUT_MS: expected at most REQUEST_TIMEOUT_MS \(30000\), got "40000"$/,
    ],
    [{ REQUEST_TIMEOUT_MS: '5000' }, /^HEADERS_TIMEOUT_MS: expected at most REQUEST_TIMEOUT_MS \(5000\), got "10000"$/],
    [{ MAX_CONNECTIONS: '0' }, /^MAX_CONNECTIONS: expected an integer from 1 to 10000000, got "0"$/],
    [{ MAX_CONNECTIONS: '1e3x' }, /^MAX_CONNECTIONS: expected an integer from 1/],
    [{ ADMIN_PORT: '70000' }, /^ADMIN_PORT: expected an integer from 0 to 65535, got "70000"$/],
    [{ ADMIN_PORT: '4000' }, /^ADMIN_PORT: expected a port other than PORT \(4000\), got "4000"$/],
    [{ PORT: '8080', ADMIN_PORT: '8080' }, /^ADMIN_PORT: expected a port other than PORT \(8080\), got "8080"$/],
  ])('refuses the connection value %o with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('reads the OpenTelemetry variables: the traces URL is the endpoint with v1/traces after its path', () => {
    const tracing = (env: Record<string, string>) => loadConfig(env).tracing;
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracesUrl).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example.com/otlp/' }).tracesUrl).toBe(
      'https://otel.example.com/otlp/v1/traces',
    );
    expect(
      tracing({
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_SERVICE_NAME: 'heads-edge',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    ).toEqual({
      tracesUrl: undefined,
      protocol: 'http/json',
      serviceName: 'heads-edge',
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
    });
  });

  it.each([
    [{ UPSTREAM_URL: 'ftp://x/v2' }, /^UPSTREAM_URL: expected an http\(s\) URL ending in \/v2/],
    [{ UPSTREAM_URL: 'http://x/v1' }, /^UPSTREAM_URL: expected an http\(s\) URL ending in \/v2/],
    [{ PORT: 'abc' }, /^PORT: expected an integer from 0 to 65535, got "abc"$/],
    [{ PORT: '70000' }, /^PORT: expected an integer from 0 to 65535/],
    [{ UPSTREAM_TIMEOUT_MS: '0' }, /^UPSTREAM_TIMEOUT_MS: expected an integer from 1/],
    [{ UPSTREAM_CONNECTIONS: '1.5' }, /^UPSTREAM_CONNECTIONS: expected an integer from 1/],
    [{ OPERATION_TIMEOUT_MS: '5000' }, /^OPERATION_TIMEOUT_MS: expected more than UPSTREAM_TIMEOUT_MS \(10000\)/],
    [{ INTROSPECTION: 'maybe' }, /^INTROSPECTION: expected true or false/],
    [{ CORS_ORIGINS: 'not a url' }, /^CORS_ORIGINS: expected a comma-separated list/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL: expected one of/],
    [{ WORKERS: '0' }, /^WORKERS: expected an integer from 1 to 256/],
    [{ PLANNER: 'maybe' }, /^PLANNER: expected on or off/],
    [{ COMPILED_EXECUTION: 'yes' }, /^COMPILED_EXECUTION: expected on or off/],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      /^OTEL_EXPORTER_OTLP_ENDPOINT: expected an http\(s\) URL of an OTLP\/HTTP receiver, got "collector:4318"$/,
    ],
    [
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      /^OTEL_EXPORTER_OTLP_PROTOCOL: expected http\/protobuf or http\/json, got "grpc"$/,
    ],
    [
      { OTEL_TRACES_SAMPLER: 'jaeger_remote' },
      /^OTEL_TRACES_SAMPLER: expected one of always_on, always_off, traceidratio, parentbased_always_on/,
    ],
    [{ OTEL_TRACES_SAMPLER_ARG: '1.5' }, /^OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1, got "1.5"$/],
    [{ OTEL_TRACES_SAMPLER_ARG: 'half' }, /^OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1/],
    [{ UPSTREAM_ROUTES_FILE: '/no/such/file.json' }, /^UPSTREAM_ROUTES_FILE: cannot read a JSON object from/],
    [{ UPSTREAM_ROUTES_FILE: jsonFile('{"getHead": {}}') }, /^UPSTREAM_ROUTES_FILE: getHead: unknown operation/],
    [
      { UPSTREAM_ROUTES_FILE: jsonFile('{"deleteHead": {"method": "FETCH"}}') },
      /^UPSTREAM_ROUTES_FILE: deleteHead.method: method must be one of/,
    ],
    [
      { UPSTREAM_ROUTES_FILE: jsonFile('{"getHeadById": {"path": "/head"}}') },
      /^UPSTREAM_ROUTES_FILE: getHeadById.path: path must contain \{id\}/,
    ],
  ])('refuses %o with one line naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
