import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { loadConfig } from '../../src/config.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../../src/reference-upstream/server.js';
import { HeadShape } from '../../src/reference-upstream/store.js';
import { buildGateway, type Gateway } from '../../src/server/gateway.js';
import { createGatewayServer } from '../../src/server/http/http-server.js';
import { createLogger } from '../../src/server/instruments/logger.js';
import { GatewayMetrics } from '../../src/server/instruments/metrics.js';
import { createAdminServer } from '../../src/server/probes/admin-server.js';
import type { HeadEvents } from '../../src/server/real-time/head-events.js';
import type { Subscriptions } from '../../src/server/real-time/subscriptions.js';
import { connectSharedState, type SharedRedis } from '../../src/server/shared-state/shared-redis.js';
import type { StatusPage } from '../../src/server/status/page.js';
import type { KnownTokens } from '../../src/server/traffic/known-tokens.js';
import type { Handler } from '../../src/server/transports/node.js';
import type { WebSocketTransport } from '../../src/server/transports/websocket.js';
import type { Tracing } from '../../src/telemetry/tracing.js';
import type { UpstreamAttempt } from '../../src/upstream/transport.js';
import type { Upstream } from '../../src/upstream/upstream.js';

export interface GraphQLResponse<T = Record<string, unknown>> {
  data?: T | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }[];
}

/** A raw answer: the HTTP status and headers kept beside the parsed body. */
export interface Answer<T = GraphQLResponse> {
  status: number;
  headers: Headers;
  body: T;
}

/** A fresh object each time: `gateway.fetch` writes the body's content-length into the headers object it is given. */
export const jsonHeaders = () => ({
  'content-type': 'application/json',
  accept: 'application/graphql-response+json, application/json',
});

export async function answer<T = GraphQLResponse>(response: Response): Promise<Answer<T>> {
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text === '' ? {} : JSON.parse(text)) as T };
}

/** A POST to the gateway's /graphql: `body` as it is (a string) or as JSON, with `headers` over the JSON ones. */
export async function post(
  on: TestGateway,
  body: string | object,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return answer(
    await on.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { ...jsonHeaders(), ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
  );
}

/** A head as the reference upstream serves it (`shape`: Get Head Ext By Id A by default), to compare answers with. */
export const upstreamHead = (on: TestGateway, id: string, shape: HeadShape = HeadShape.A_EXT) =>
  on.reference.store.project(on.reference.store.findHead(id)!, shape) as Record<string, any>;

/**
 * A gateway on the real reference upstream (loopback port), served on a loopback port of its own
 * as main.ts serves it (Node's server, compression, sockets): `gateway.fetch` sends there, over
 * real HTTP (`http://gateway/…` is its origin). `app` is its fetch transport, for the tests of that.
 */
export interface TestGateway {
  readonly reference: ReferenceUpstream;
  readonly upstream: Upstream;
  readonly gateway: Gateway;
  /** The same gateway on the fetch transport (WHATWG Request and Response, no socket). */
  readonly app: Gateway;
  /**
   * The same gateway on the HTTP transport: what Node's server serves (`listen` puts it behind the production server).
   */
  readonly handler: Handler;
  /** Its tracing (OTEL_* in `env`): `flush` exports the spans still in the batch. */
  readonly tracing: Tracing;
  /** The gateway's own metrics registry (without Node's process metrics). */
  readonly metrics: GatewayMetrics;
  /** Its Redis connection, as main.ts makes it, when `env` sets REDIS_URL. */
  readonly redis: SharedRedis | undefined;
  /** The heads its writes may have changed, as their watchers hear of them. */
  readonly headEvents: HeadEvents;
  /** The tokens it knows to be real (traffic/known-tokens.ts). */
  readonly knownTokens: KnownTokens;
  readonly subscriptions: Subscriptions;
  readonly websocket: WebSocketTransport;
  /** Its status page and sampler, where it is served (ADMIN_PORT or STATUS_PAGE_PUBLIC, and STATUS_PAGE). */
  readonly status: StatusPage | undefined;
  /** With ADMIN_PORT in `env`: the admin server's origin (`http://127.0.0.1:PORT`), as main.ts serves it. */
  readonly admin: string | undefined;
  /** Every log line the gateway wrote, as text, for "no token in the logs" checks. */
  readonly logLines: string[];
  /** Every upstream call attempt the gateway made (retries included), also those that never reached the reference. */
  readonly attempts: UpstreamAttempt[];
  execute<T = Record<string, unknown>>(
    query: string,
    variables?: Record<string, unknown>,
    headers?: Record<string, string>,
  ): Promise<GraphQLResponse<T>>;
  /** Its /graphql URL, on the loopback port it is served on (main.ts's server, compression included). */
  listen(): Promise<string>;
  /** Upstream requests recorded since the last reset, optionally of one operation. */
  calls(operation?: string): ReferenceUpstream['requests'];
  reset(): void;
  close(): Promise<void>;
}

/** A debug-level logger whose lines are kept, so tests can search everything the gateway wrote. */
function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', destination }), lines };
}

/**
 * The gateway as `main.ts` builds it (`buildGateway`), configured by `env` as the process
 * environment would configure it (defaults for the rest), on a reference upstream of its own.
 */
/**
 * `reference`: another gateway's reference upstream, shared (two replicas in front of one upstream); closed by its own
 * gateway.
 */
export async function startTestGateway(
  options: { env?: Record<string, string>; reference?: ReferenceUpstream } = {},
): Promise<TestGateway> {
  const config = loadConfig(options.env ?? {});
  const reference = options.reference ?? (await startReferenceUpstream());
  const attempts: UpstreamAttempt[] = [];
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const { logger, lines: logLines } = capturingLogger();
  const redis = config.redis === undefined ? undefined : await connectSharedState(config.redis, logger, metrics);
  const cacheRedis =
    config.responseCacheRedis === undefined
      ? undefined
      : await connectSharedState(config.responseCacheRedis, logger, metrics);
  const built = buildGateway(config, reference.url, {
    logger,
    metrics,
    redis,
    cacheRedis,
    onAttempt: (attempt) => attempts.push(attempt),
  });
  const { app, handler, websocket, shedder, headEvents, knownTokens, subscriptions, upstream, tracing, status } = built;
  await knownTokens.load();
  const server = createGatewayServer(handler, config, metrics);
  websocket.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // With ADMIN_PORT, the admin server as main.ts makes it (on a loopback port of its own, whatever ADMIN_PORT says).
  const adminServer =
    config.connections.adminPort === undefined
      ? undefined
      : createAdminServer({ ...built, metrics }, config.connections);
  await new Promise<void>((resolve) => (adminServer ? adminServer.listen(0, '127.0.0.1', resolve) : resolve()));
  /** fetch over the socket: `http://gateway/…` is the server's origin. */
  const gateway: Gateway = {
    fetch: (input, init) => {
      const request = input instanceof Request ? input : undefined;
      const url = String(request?.url ?? input).replace(/^http:\/\/gateway(?=\/|$)/, origin);
      return fetch(request === undefined ? url : new Request(url, request), init as RequestInit);
    },
  };

  return {
    reference,
    upstream,
    gateway,
    app,
    handler,
    tracing,
    metrics,
    redis,
    headEvents,
    knownTokens,
    subscriptions,
    websocket,
    status,
    logLines,
    attempts,
    admin: adminServer && `http://127.0.0.1:${(adminServer.address() as AddressInfo).port}`,
    async execute(query, variables, headers = {}) {
      const response = await gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json, application/json',
          ...headers,
        },
        body: JSON.stringify({ query, variables }),
      });
      return (await response.json()) as GraphQLResponse<never>;
    },
    listen: () => Promise.resolve(`${origin}/graphql`),
    calls: (operation) =>
      operation === undefined ? reference.requests : reference.requests.filter((r) => r.operation === operation),
    reset() {
      reference.clearFaults();
      reference.resetRecording();
      attempts.length = 0;
    },
    async close() {
      const closed = new Promise((resolve) => server.close(resolve));
      server.closeAllConnections();
      adminServer?.close();
      adminServer?.closeAllConnections();
      await closed;
      shedder.close();
      status?.close();
      subscriptions.completeAll();
      websocket.close();
      headEvents.close();
      knownTokens.close();
      await upstream.close();
      await Promise.all([redis?.close(), cacheRedis?.close()]);
      await tracing.shutdown();
      if (options.reference === undefined) await reference.close();
    },
  };
}
