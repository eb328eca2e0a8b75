import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { loadConfig } from '../../src/config.js';
import { createGateway, type Gateway } from '../../src/gateway.js';
import { createGatewayServer } from '../../src/http-server.js';
import { createLogger } from '../../src/logger.js';
import type { GatewayMetrics } from '../../src/metrics.js';
import type { SharedRedis } from '../../src/shared-state.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../../src/reference-upstream/server.js';
import { defaultRoutes } from '../../src/upstream/routes.js';
import type { UpstreamAttempt } from '../../src/upstream/transport.js';
import { createUpstream, type Upstream } from '../../src/upstream/upstream.js';

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
export const jsonHeaders = () => ({ 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json' });

export async function answer<T = GraphQLResponse>(response: Response): Promise<Answer<T>> {
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text === '' ? {} : JSON.parse(text)) as T };
}

/** A gateway on the real reference upstream (loopback port), driven through `yoga.fetch`. */
export interface TestGateway {
  readonly reference: ReferenceUpstream;
  readonly upstream: Upstream;
  readonly gateway: Gateway;
  /** Every log line the gateway wrote, as text, for "no token in the logs" checks. */
  readonly logLines: string[];
  /** Every upstream call attempt the gateway made (retries included), also those that never reached the reference. */
  readonly attempts: UpstreamAttempt[];
  execute<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<GraphQLResponse<T>>;
  /** Serves the gateway on a loopback port as main.ts does (compression included); its /graphql URL. */
  listen(): Promise<string>;
  /** Upstream requests recorded since the last reset, optionally of one operation. */
  calls(operation?: string): ReferenceUpstream['requests'];
  reset(): void;
  close(): Promise<void>;
}

/** A debug-level logger whose lines are kept, so tests can search everything the gateway wrote. */
export function capturingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', destination }), lines };
}

/** `env` is read as the process environment would be (defaults for the rest). */
export async function startTestGateway(
  options: { timeoutMs?: number; env?: Record<string, string>; maxResponseBytes?: number; redis?: SharedRedis; metrics?: GatewayMetrics } = {},
): Promise<TestGateway> {
  const reference = await startReferenceUpstream();
  const attempts: UpstreamAttempt[] = [];
  const upstream = createUpstream({
    baseUrl: reference.url,
    routes: defaultRoutes,
    timeoutMs: options.timeoutMs ?? 3_000,
    connections: 16,
    retry: { limit: 2, statusCodes: [502, 503, 504], errorCodes: ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET'], baseDelayMs: 5, maxDelayMs: 20 },
    ...(options.maxResponseBytes === undefined ? {} : { maxResponseBytes: options.maxResponseBytes }),
    onAttempt: (attempt) => attempts.push(attempt),
  });
  const { logger, lines: logLines } = capturingLogger();
  const settings = loadConfig(options.env ?? {});
  const gateway = createGateway({ upstream, logger, settings, ...(options.redis ? { redis: options.redis } : {}), ...(options.metrics ? { metrics: options.metrics } : {}) });
  const servers: Server[] = [];

  return {
    reference,
    upstream,
    gateway,
    logLines,
    attempts,
    async execute(query, variables, headers = {}) {
      const response = await gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...headers },
        body: JSON.stringify({ query, variables }),
      });
      return (await response.json()) as GraphQLResponse<never>;
    },
    async listen() {
      const server = createGatewayServer(gateway, settings);
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
    },
    calls: (operation) => (operation === undefined ? reference.requests : reference.requests.filter((r) => r.operation === operation)),
    reset() {
      reference.clearFaults();
      reference.resetRecording();
      attempts.length = 0;
    },
    async close() {
      await Promise.all(
        servers.map((server) => {
          const closed = new Promise((resolve) => server.close(resolve));
          server.closeAllConnections();
          return closed;
        }),
      );
      await upstream.close();
      await reference.close();
    },
  };
}
