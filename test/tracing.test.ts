import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';
import { startGatewayProcess } from './support/process.js';

/** One span as an OTLP/HTTP receiver gets it (JSON encoding), attributes flattened to values. */
interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number };
  links?: { traceId: string; spanId: string }[];
}

/** What an OTLP/HTTP receiver got: one entry per export request. */
interface Received {
  readonly path: string;
  readonly contentType: string;
  readonly body: Buffer;
}

// OTLP's SpanKind numbers (the proto's, which the JSON encoding keeps).
const SERVER = 2;
const CLIENT = 3;
const INTERNAL = 1;
const STATUS_ERROR = 2;

type AnyValue = {
  stringValue?: string;
  intValue?: number | string;
  boolValue?: boolean;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
};

function plainValue(value: AnyValue): unknown {
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(plainValue);
  if (value.intValue !== undefined) return Number(value.intValue);
  return value.stringValue ?? value.boolValue ?? value.doubleValue;
}

function spansOf(received: readonly Received[]): ExportedSpan[] {
  return received.flatMap(({ body }) => {
    const request = JSON.parse(body.toString()) as {
      resourceSpans: {
        scopeSpans: {
          spans: (Omit<ExportedSpan, 'attributes'> & { attributes: { key: string; value: AnyValue }[] })[];
        }[];
      }[];
    };
    return request.resourceSpans.flatMap((resource) =>
      resource.scopeSpans.flatMap((scope) =>
        scope.spans.map((span) => ({
          ...span,
          attributes: Object.fromEntries(span.attributes.map(({ key, value }) => [key, plainValue(value)])),
        })),
      ),
    );
  });
}

/** A loopback OTLP/HTTP receiver: keeps every export request and answers it as a collector would. */
async function startReceiver(): Promise<{ url: string; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const contentType = request.headers['content-type'] ?? '';
      received.push({ path: request.url ?? '', contentType, body: Buffer.concat(chunks) });
      // An empty ExportTraceServiceResponse: `{}` in JSON, no bytes in protobuf.
      response.writeHead(200, { 'content-type': contentType }).end(contentType === 'application/json' ? '{}' : '');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const traceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

function parseTraceparent(header: string | undefined): { traceId: string; spanId: string; flags: string } {
  const match = traceparentPattern.exec(header ?? '');
  if (match === null) throw new Error(`not a W3C traceparent: ${header}`);
  return { traceId: match[1]!, spanId: match[2]!, flags: match[3]! };
}

/** A POST to the gateway with a body as given (an object is sent as JSON) and extra headers. */
const operationLine = (t: TestGateway) =>
  t.logLines
    .map((text) => JSON.parse(text) as Record<string, unknown>)
    .find((entry) => entry.msg === 'graphql operation')!;

const headWithHair = 'query HeadWithHair($id: ID!) { head(id: $id) { updatedAt hair { userId } } }';

describe('tracing to an OTLP/HTTP receiver (http/json)', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let t: TestGateway;
  let headId: string;

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startTestGateway({
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        UPSTREAM_CALL_BUDGET: '20',
        MAX_DEPTH: '4',
        OPERATION_LOG: 'all',
      },
    });
    headId = t.reference.store.headIds()[0]!;
  });

  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  afterEach(() => {
    receiver.received.length = 0;
    t.reset();
    t.logLines.length = 0;
  });

  /** The spans exported so far, once the batch has gone out. */
  const exported = async (): Promise<ExportedSpan[]> => {
    await t.tracing.flush();
    return spansOf(receiver.received);
  };

  it('gives one operation with two upstream calls one trace: the operation span is the parent of the plan and of both calls, whose ids the upstream saw', async () => {
    const { body } = await post(t, { query: headWithHair, variables: { id: headId } });
    expect(body.errors).toBeUndefined();
    const spans = await exported();
    expect(receiver.received.every((r) => r.path === '/v1/traces' && r.contentType === 'application/json')).toBe(true);

    const operation = spans.find((span) => span.kind === SERVER)!;
    expect(operation).toMatchObject({
      name: 'query HeadWithHair',
      attributes: {
        'graphql.operation.name': 'HeadWithHair',
        'graphql.operation.type': 'query',
        'gateway.operation.outcome': 'ok',
        'gateway.operation.upstream_calls': 2,
      },
    });
    expect(operation.parentSpanId ?? '').toBe(''); // no traceparent came in: a new trace
    expect(spans.every((span) => span.traceId === operation.traceId)).toBe(true);

    const plan = spans.filter((span) => span.kind === INTERNAL);
    expect(plan).toHaveLength(1);
    expect(plan[0]).toMatchObject({
      name: 'upstream plan',
      parentSpanId: operation.spanId,
      attributes: { 'gateway.plan.calls': 2, 'gateway.plan.exact': true },
    });

    const calls = spans.filter((span) => span.kind === CLIENT);
    // updatedAt is in Get Head Ext, hair.userId in Get Head By Id.
    expect(
      calls
        .map((call) => [call.name, call.attributes['gateway.upstream.operation'], call.attributes['url.template']])
        .sort(),
    ).toEqual([
      ['GET /head/{id}', 'getHeadById', '/head/{id}'],
      ['GET /heads/{head_id}/ext', 'getHeadExt', '/heads/{head_id}/ext'],
    ]);
    for (const call of calls) {
      expect(call.parentSpanId).toBe(operation.spanId);
      expect(call.attributes).toMatchObject({
        'http.request.method': 'GET',
        'http.response.status_code': 200,
        'gateway.upstream.attempt': 1,
        'gateway.upstream.retried': false,
      });
    }

    // The upstream saw each call's own span as the parent, in the operation's trace, sampled.
    const seen = t.reference.requests.map((request) => parseTraceparent(request.traceparent));
    expect(seen).toHaveLength(2);
    expect(seen.map((parent) => parent.traceId)).toEqual([operation.traceId, operation.traceId]);
    expect(seen.map((parent) => parent.spanId).sort()).toEqual(calls.map((call) => call.spanId).sort());
    expect(seen.map((parent) => parent.flags)).toEqual(['01', '01']);

    // The operation's log line names the same span.
    expect(operationLine(t)).toMatchObject({ traceId: operation.traceId, spanId: operation.spanId });
  });

  it("gives a subscription's event an operation span of its own, under its subscription's, linked to the write that caused it, with the event's upstream read under it", async () => {
    const controller = new AbortController();
    const response = await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        query: 'subscription Traced($id: ID!) { headChanged(id: $id) { head { name } } }',
        variables: { id: headId },
      }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    let text = '';
    await t.execute('mutation Rename($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }', {
      input: { id: headId, name: 'Traced' },
    });
    while (!text.includes('event: next')) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    controller.abort();
    // The subscription's own span ends once its stream does.
    const spans = await vi.waitFor(async () => {
      const all = await exported();
      expect(all.filter((span) => span.name === 'subscription Traced')).toHaveLength(2);
      return all;
    });
    const write = spans.find((span) => span.kind === SERVER && span.name === 'mutation Rename')!;
    // The event is an operation of its own: its span a server span, under its subscription's, linked to the write.
    const event = spans.find((span) => (span.links ?? []).length > 0)!;
    expect(event).toMatchObject({ name: 'subscription Traced', kind: SERVER });
    expect(event.links).toEqual([expect.objectContaining({ traceId: write.traceId, spanId: write.spanId })]);
    const subscription = spans.find((span) => span.name === 'subscription Traced' && span !== event);
    expect(event.parentSpanId).toBe(subscription?.spanId);
    const reads = spans.filter((span) => span.kind === CLIENT && span.parentSpanId === event.spanId);
    expect(reads.map((read) => read.attributes)).toEqual([
      expect.objectContaining({ 'http.request.method': 'GET', 'http.response.status_code': 200 }),
    ]);
  });

  it('continues the trace of an incoming traceparent, and follows its sampling decision', async () => {
    const callerTrace = '4bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '00f067aa0ba902b7';
    await post(
      t,
      { query: headWithHair, variables: { id: headId } },
      { traceparent: `00-${callerTrace}-${callerSpan}-01`, tracestate: 'caller=1' },
    );
    const spans = await exported();
    const operation = spans.find((span) => span.kind === SERVER)!;
    expect(operation).toMatchObject({ traceId: callerTrace, parentSpanId: callerSpan });
    expect(spans.filter((span) => span.kind === CLIENT).map((call) => call.traceId)).toEqual([
      callerTrace,
      callerTrace,
    ]);
    expect(t.reference.requests.map((request) => parseTraceparent(request.traceparent).traceId)).toEqual([
      callerTrace,
      callerTrace,
    ]);
    expect(t.reference.requests.map((request) => request.headers.tracestate)).toEqual(['caller=1', 'caller=1']);

    // A caller that does not sample: nothing recorded, but the upstream still joins its trace (unsampled).
    receiver.received.length = 0;
    t.reset();
    await post(
      t,
      { query: headWithHair, variables: { id: headId } },
      { traceparent: `00-${callerTrace}-${callerSpan}-00` },
    );
    expect(await exported()).toEqual([]);
    expect(t.reference.requests.map((request) => parseTraceparent(request.traceparent))).toEqual([
      expect.objectContaining({ traceId: callerTrace, flags: '00' }),
      expect.objectContaining({ traceId: callerTrace, flags: '00' }),
    ]);
  });

  it('gives every attempt of a retried call a span of its own: its number, whether it was retried, its status', async () => {
    t.reference.injectFault('getHeadById', { kind: 'status', status: 503 });
    const { body } = await post(t, { query: headWithHair, variables: { id: headId } });
    expect(body.errors).toBeUndefined();
    const attempts = (await exported()).filter(
      (span) => span.attributes['gateway.upstream.operation'] === 'getHeadById',
    );
    expect(attempts.map((span) => span.attributes)).toEqual([
      expect.objectContaining({
        'gateway.upstream.attempt': 1,
        'gateway.upstream.retried': true,
        'http.response.status_code': 503,
        'error.type': 'UPSTREAM_ERROR',
      }),
      expect.objectContaining({
        'gateway.upstream.attempt': 2,
        'gateway.upstream.retried': false,
        'http.response.status_code': 200,
        'http.request.resend_count': 1,
      }),
    ]);
    expect(attempts[0]!.status.code).toBe(STATUS_ERROR);
    const parents = t.reference.requests
      .filter((request) => request.operation === 'getHeadById')
      .map((request) => parseTraceparent(request.traceparent).spanId);
    expect(parents).toEqual(attempts.map((span) => span.spanId));
  });

  it("gives each operation of a batch a span of its own, both children of the caller's span", async () => {
    const callerTrace = '5bf92f3577b34da6a3ce929d0e0e4736';
    const callerSpan = '10f067aa0ba902b7';
    const batch = [
      { query: headWithHair, variables: { id: headId } },
      { query: 'query Counted { heads(first: 1) { totalCount } }' },
    ];
    const { body } = await post(t, batch, { traceparent: `00-${callerTrace}-${callerSpan}-01` });
    expect(body).toHaveLength(2);
    const spans = await exported();
    const operations = spans.filter((span) => span.kind === SERVER);
    expect(operations.map((span) => span.name).sort()).toEqual(['query Counted', 'query HeadWithHair']);
    for (const operation of operations)
      expect(operation).toMatchObject({
        traceId: callerTrace,
        parentSpanId: callerSpan,
        attributes: { 'gateway.operation.outcome': 'ok' },
      });
    const operationIds = operations.map((span) => span.spanId);
    const calls = spans.filter((span) => span.kind === CLIENT);
    expect(calls).toHaveLength(3);
    for (const call of calls) expect(operationIds).toContain(call.parentSpanId);
    expect(t.reference.requests.map((request) => parseTraceparent(request.traceparent).spanId).sort()).toEqual(
      calls.map((call) => call.spanId).sort(),
    );
  });

  it('puts no token, password or variable value in any span', async () => {
    const login = await post(t, {
      query: 'mutation Login($input: LoginInput!) { login(input: $input) { accessToken } }',
      variables: { input: { username: DEMO_CREDENTIALS.username, password: DEMO_CREDENTIALS.password } },
    });
    const token = (login.body.data as { login: { accessToken: string } }).login.accessToken;
    const marker = `marker-${Date.now().toString(36)}`;
    await post(
      t,
      {
        query: 'query Listed($search: String) { heads(first: 1, search: $search) { totalCount } }',
        variables: { search: marker },
      },
      { authorization: `Bearer ${token}` },
    );
    await post(t, { query: headWithHair, variables: { id: headId } }, { authorization: `Bearer ${token}` });
    await post(t, { query: '{ permissions(first: 1) { totalCount } }' }, { authorization: `Bearer ${token}` });
    const spans = await exported();
    expect(spans.filter((span) => span.kind === SERVER)).toHaveLength(4);
    const everything = receiver.received.map((r) => r.body.toString()).join('\n');
    for (const secret of [token, DEMO_CREDENTIALS.password, marker, headId]) expect(everything).not.toContain(secret);
  });

  it("carries the client app as it names itself (graphql.client.name and .version): Apollo Client 4's clientAwareness, graphql-client-name; nothing for none or a refused value", async () => {
    const url = await t.listen();
    const apollo = new ApolloClient({
      cache: new InMemoryCache(),
      link: new HttpLink({ uri: url }),
      clientAwareness: { name: 'head-viewer-ios', version: '7.1.0 (311)' },
    });
    await apollo.query({ query: gql`query Named { heads(first: 1) { totalCount } }` });
    await post(
      t,
      { query: 'query Hive { heads(first: 1) { totalCount } }' },
      { 'graphql-client-name': 'hive-cli', 'graphql-client-version': '0.9.1' },
    );
    await post(t, { query: 'query Nameless { heads(first: 1) { totalCount } }' });
    await post(
      t,
      { query: 'query Hostile { heads(first: 1) { totalCount } }' },
      { 'apollographql-client-name': 'a"b', 'apollographql-client-version': `1.${'0'.repeat(100)}` },
    );
    const byOperation = Object.fromEntries(
      (await exported())
        .filter((span) => span.kind === SERVER)
        .map((span) => [
          span.attributes['graphql.operation.name'],
          [span.attributes['graphql.client.name'], span.attributes['graphql.client.version']],
        ]),
    );
    expect(byOperation).toEqual({
      Named: ['head-viewer-ios', '7.1.0 (311)'],
      Hive: ['hive-cli', '0.9.1'],
      Nameless: [undefined, undefined],
      Hostile: [undefined, `1.${'0'.repeat(62)}`],
    });
  });

  it.each([
    ['depth', { query: '{ heads(first: 1) { nodes { hair { name } } edges { node { hair { name } } } } }' }],
    ['tokens', { query: `{ heads(first: 1) { totalCount ${'totalCount '.repeat(2_000)} } }` }],
    ['body', `{"query":"{ heads(first: 1) { totalCount } }","pad":"${'x'.repeat(110_000)}"}`],
    ['batch', JSON.stringify(Array.from({ length: 11 }, () => ({ query: '{ heads(first: 1) { totalCount } }' })))],
    // 21 heads by id: 21 calls planned, over the budget of 20.
    [
      'budget',
      {
        query: `{ ${Array.from({ length: 21 }, (_, i) => `h${i}: head(id: "00000000-0000-4000-8000-${String(i).padStart(12, '0')}") { name }`).join(' ')} }`,
      },
    ],
  ])('names the limit that refused an operation (%s)', async (limit, request) => {
    const { body } = await post(t, request);
    expect(body.data ?? undefined).toBeUndefined();
    const [operation, ...others] = (await exported()).filter((span) => span.kind === SERVER);
    expect(others).toEqual([]);
    expect(operation!.attributes).toMatchObject({
      'gateway.operation.outcome': 'refused',
      'gateway.operation.refused_by': limit,
      'gateway.operation.upstream_calls': 0,
    });
    expect(operation!.attributes['gateway.operation.error_codes']).toEqual([body.errors![0]!.extensions!.code]);
    expect(t.reference.requests).toEqual([]);
  });
});

describe('tracing over http/protobuf', () => {
  it('exports the operation to /v1/traces as protobuf, in the trace the upstream joined', async () => {
    const receiver = await startReceiver();
    const t = await startTestGateway({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } });
    try {
      await post(t, { query: headWithHair, variables: { id: t.reference.store.headIds()[0]! } });
      await t.tracing.flush();
      expect(receiver.received.map((r) => [r.path, r.contentType])).toEqual([['/v1/traces', 'application/x-protobuf']]);
      // Ids are raw bytes in protobuf: the upstream's trace id and each call's span id are in the export.
      const body = receiver.received[0]!.body;
      const seen = t.reference.requests.map((request) => parseTraceparent(request.traceparent));
      expect(seen).toHaveLength(2);
      for (const { traceId, spanId } of seen) {
        expect(body.includes(Buffer.from(traceId, 'hex'))).toBe(true);
        expect(body.includes(Buffer.from(spanId, 'hex'))).toBe(true);
      }
      expect(body.includes(Buffer.from('avatar-head-gateway'))).toBe(true);
    } finally {
      await t.close();
      await receiver.close();
    }
  });
});

describe('without an exporter', () => {
  it('still sends every upstream call a traceparent of its own span, in the operation trace the log line names', async () => {
    const t = await startTestGateway({ env: { OPERATION_LOG: 'all' } });
    try {
      const headId = t.reference.store.headIds()[0]!;
      await t.execute(headWithHair, { id: headId });
      const seen = t.calls().map((request) => parseTraceparent(request.traceparent));
      expect(seen).toHaveLength(2);
      expect(seen[0]!.spanId).not.toBe(seen[1]!.spanId);
      const line = operationLine(t);
      expect(seen.map((parent) => parent.traceId)).toEqual([line.traceId, line.traceId]);
      expect(seen.map((parent) => parent.spanId)).not.toContain(line.spanId);

      t.reset();
      const callerTrace = '0af7651916cd43dd8448eb211c80319c';
      await t.execute(headWithHair, { id: headId }, { traceparent: `00-${callerTrace}-b7ad6b7169203331-01` });
      expect(t.calls().map((request) => parseTraceparent(request.traceparent))).toEqual([
        expect.objectContaining({ traceId: callerTrace, flags: '01' }),
        expect.objectContaining({ traceId: callerTrace, flags: '01' }),
      ]);
    } finally {
      await t.close();
    }
  });
});

describe('the gateway process', () => {
  it('exports the spans still in its batch when it shuts down', async () => {
    const receiver = await startReceiver();
    try {
      // A schedule delay of ten minutes: only the shutdown can send the batch.
      const gateway = await startGatewayProcess({
        UPSTREAM_URL: '',
        LOG_LEVEL: 'warn',
        WORKERS: '1',
        SHUTDOWN_DELAY_MS: '0',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '600000',
      });
      try {
        const response = await fetch(gateway.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: 'query Shutdown { heads(first: 1) { totalCount } }' }),
        });
        expect(response.status).toBe(200);
        expect(receiver.received).toEqual([]);
        gateway.child.kill('SIGTERM');
        expect(await gateway.exited).toBe(0);
        expect(spansOf(receiver.received).find((span) => span.kind === SERVER)).toMatchObject({
          name: 'query Shutdown',
          attributes: { 'gateway.operation.outcome': 'ok' },
        });
      } finally {
        gateway.kill();
      }
    } finally {
      await receiver.close();
    }
  });
});
