import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { loadConfig } from '../../src/config.js';
import { buildGateway, type Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/logger.js';
import { GatewayMetrics } from '../../src/metrics.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../../src/reference-upstream/server.js';
import type { UpstreamAttempt } from '../../src/upstream/transport.js';
import type { Upstream } from '../../src/upstream/upstream.js';

export interface GraphQLResponse<T = Record<string, unknown>> {
  data?: T | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }[];
}

/** A gateway on the real reference upstream (loopback port), driven through `yoga.fetch`. */
export interface TestGateway {
  readonly reference: ReferenceUpstream;
  readonly upstream: Upstream;
  readonly gateway: Gateway;
  /** The gateway's own metrics registry (without Node's process metrics). */
  readonly metrics: GatewayMetrics;
  /** Every log line the gateway wrote, as text, for "no token in the logs" checks. */
  readonly logLines: string[];
  /** Every upstream call attempt the gateway made (retries included), also those that never reached the reference. */
  readonly attempts: UpstreamAttempt[];
  execute<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<GraphQLResponse<T>>;
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
export async function startTestGateway(options: { env?: Record<string, string> } = {}): Promise<TestGateway> {
  const config = loadConfig(options.env ?? {});
  const reference = await startReferenceUpstream();
  const attempts: UpstreamAttempt[] = [];
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const { logger, lines: logLines } = capturingLogger();
  const { app: gateway, upstream } = buildGateway(config, reference.url, { logger, metrics, onAttempt: (attempt) => attempts.push(attempt) });

  return {
    reference,
    upstream,
    gateway,
    metrics,
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
    calls: (operation) => (operation === undefined ? reference.requests : reference.requests.filter((r) => r.operation === operation)),
    reset() {
      reference.clearFaults();
      reference.resetRecording();
      attempts.length = 0;
    },
    async close() {
      await upstream.close();
      await reference.close();
    },
  };
}
