import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ExecutionResult, GraphQLError } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { loadConfig } from '../src/config.js';
import { useAnswerBody } from '../src/server/answers/answer.js';
import { errorMasking } from '../src/server/answers/masking.js';
import { serialise } from '../src/server/http/serialisation.js';
import { createLogger } from '../src/server/instruments/logger.js';
import type { Policy } from '../src/server/pipeline/stages.js';
import { useInFlight } from '../src/server/traffic/in-flight.js';
import { LoadShedder } from '../src/server/traffic/load-shedder.js';
import { fetchTransport } from '../src/server/transports/fetch.js';
import { nodeTransport } from '../src/server/transports/node.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { oneOperation, serveOf } from './support/pipeline.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { until } from './support/until.js';

/*
 * The one path (docs/architecture.md): every GraphQL request meets the same stages in the same
 * order, on every transport and in every configuration; what makes a hot query fast is work done
 * once per document (its prepared document, plan shape and compiled code), never a second path.
 */

/**
 * What belongs to a transport, not to the answer, left out when transports are compared: the
 * framing headers, and HTTP's compression (it varies on Accept-Encoding, which fetch has none
 * of); and what a clock says (a kept answer's seconds left, which tick between two sends).
 */
const framing = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
const transportFree = ([name, value]: [string, string]): [string, string] => [
  name,
  name === 'vary'
    ? value.replace(/,?\s*Accept-Encoding/, '')
    : name === 'cache-control'
      ? value.replace(/max-age=\d+/, 'max-age=N')
      : value,
];

interface Seen {
  readonly status: number;
  readonly headers: [string, string][];
  readonly body: string;
}

const seen = async (response: Response): Promise<Seen> => ({
  status: response.status,
  headers: [...response.headers]
    .filter(([name]) => !framing.has(name))
    .map(transportFree)
    .filter(([, value]) => value !== ''),
  body: await response.text(),
});

/** A request of the kinds a client sends, with an id of its own so both transports echo the same. */
type Sent = {
  readonly method: 'GET' | 'POST';
  readonly query?: string;
  readonly body?: string;
  readonly headers?: Record<string, string>;
};

describe('every transport, the same answer', () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  beforeAll(async () => {
    t = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: '60000', COMPILED_EXECUTION_AT_RUN: '1' } });
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());

  const send = async (to: 'http' | 'fetch', sent: Sent, requestId: string): Promise<Seen> => {
    const headers = {
      'content-type': 'application/json',
      'accept-encoding': 'identity',
      'x-request-id': requestId,
      ...sent.headers,
    };
    const target = sent.method === 'GET' ? `${url}?query=${encodeURIComponent(sent.query!)}` : url;
    const init = { method: sent.method, headers, ...(sent.body === undefined ? {} : { body: sent.body }) };
    return seen(
      to === 'http'
        ? await fetch(target, init)
        : await t.app.fetch(target.replace(/^http:\/\/[^/]+/, 'http://gateway'), init),
    );
  };

  it('HTTP and fetch answer alike, a kept answer and a hot query, a refusal, an answer with errors, a batch, a GET, parts', async () => {
    const head = (id: string) => `query OnePath { head(id: "${id}") { name hair { name } } }`;
    const requests: [string, Sent][] = [
      [
        'a query (missed, then kept)',
        {
          method: 'POST',
          body: JSON.stringify({ query: head(ids[0]!) }),
          headers: { authorization: 'Bearer one-path' },
        },
      ],
      [
        'a query with errors (compiled, not kept)',
        { method: 'POST', body: JSON.stringify({ query: head('00000000-0000-4000-8000-000000000000') }) },
      ],
      ['a refusal at intake', { method: 'POST', body: '{ not json' }],
      ['a refusal at validation', { method: 'POST', body: JSON.stringify({ query: '{ head(id: 1) { nope } }' }) }],
      ['a batch', { method: 'POST', body: JSON.stringify([{ query: head(ids[1]!) }, { query: '{ __typename }' }]) }],
      ['a GET', { method: 'GET', query: head(ids[2]!), headers: { 'x-graphql-csrf': '1' } }],
      [
        'an answer in parts',
        {
          method: 'POST',
          body: JSON.stringify({ query: `{ head(id: "${ids[3]}") { name ... @defer { headMetadata } } }` }),
          headers: { accept: 'multipart/mixed' },
        },
      ],
      [
        'a browser (CORS off)',
        {
          method: 'POST',
          body: JSON.stringify({ query: '{ __typename }' }),
          headers: { origin: 'https://app.example.com' },
        },
      ],
    ];
    for (const [what, sent] of requests) {
      // Three rounds each: a miss then kept answers, an interpreted run then compiled ones.
      for (let round = 0; round < 3; round++) {
        const requestId = `${what.replace(/\W+/g, '-')}-${round}`;
        const overHttp = await send('http', sent, requestId);
        const overFetch = await send('fetch', sent, requestId);
        expect(overFetch, `${what}, round ${round}`).toEqual(overHttp);
      }
    }
  });

  it("WebSocket answers in the same serialisation as HTTP: a result with errors (errors first), a refusal without the server's extensions", async () => {
    /** The raw `payload` of the messages a graphql-transport-ws socket gets for one subscribe, as written. */
    const overSocket = async (
      query: string,
      headers: Record<string, string> = {},
    ): Promise<{ type: string; payload: string }[]> => {
      const socket = new WebSocket(url, 'graphql-transport-ws', { headers });
      const got: { type: string; payload: string }[] = [];
      await new Promise<void>((resolve, reject) => {
        socket.on('error', reject);
        socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init' })));
        socket.on('message', (data: Buffer) => {
          const text = data.toString();
          const type = (JSON.parse(text) as { type: string }).type;
          if (type === 'connection_ack')
            return void socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query } }));
          // The payload's text as it came: what follows `"payload":` up to the message's last brace.
          if (type === 'next' || type === 'error')
            got.push({ type, payload: text.slice(text.indexOf('"payload":') + '"payload":'.length, -1) });
          if (type === 'complete' || type === 'error') resolve();
        });
      });
      socket.close();
      return got;
    };
    const overHttp = async (query: string) =>
      (
        await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query }),
        })
      ).text();

    const partial = `{ a: head(id: "${ids[4]}") { name } b: head(id: "00000000-0000-4000-8000-000000000000") { name } }`;
    const [next] = await overSocket(partial);
    expect(next!.type).toBe('next');
    expect(next!.payload).toBe(await overHttp(partial));
    expect(next!.payload.startsWith('{"errors":[')).toBe(true);

    const invalid = '{ head(id: 1) { nope } }';
    const [error] = await overSocket(invalid);
    expect(error!.type).toBe('error');
    expect(JSON.parse(error!.payload)).toEqual(JSON.parse(await overHttp(invalid)).errors);
    expect(error!.payload).not.toContain('"http"');

    // A message is not content-coded: the upgrade's Accept-Encoding, even one HTTP would answer 406, is not the
    // operation's.
    const [coded] = await overSocket(partial, { 'accept-encoding': 'identity;q=0' });
    expect(coded!.type).toBe('next');
  });

  it("writes each header of an answer once (a client reads the raw head): a kept answer's, one with errors", async () => {
    const rawHeadersOf = (body: string) =>
      new Promise<string[]>((resolve, reject) => {
        const request = httpRequest(
          url,
          { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer raw' } },
          (response) => {
            response.resume();
            resolve(response.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase()));
          },
        );
        request.once('error', reject);
        request.end(body);
      });
    for (const body of [
      JSON.stringify({ query: `{ head(id: "${ids[4]}") { name } }` }),
      JSON.stringify({ query: `{ head(id: "${ids[4]}") { name } }` }),
      JSON.stringify({ query: '{ head(id: "00000000-0000-4000-8000-000000000000") { name } }' }),
    ]) {
      const names = await rawHeadersOf(body);
      expect(names.length, names.join(', ')).toBe(new Set(names).size);
      expect(names).toEqual(expect.arrayContaining(['content-type', 'x-request-id', 'cache-control', 'vary']));
    }
  });
});

/** Runs of the operations that ran by their compiled code so far. */
const compiledRuns = async (t: TestGateway) =>
  sampleOf(await t.metrics.registry.metrics(), 'gateway_compiled_executions_total') ?? 0;

/** A manifest's document by its id, with its variables (the app's way with trusted documents). */
const byId = (
  t: TestGateway,
  documentId: string,
  variables: Record<string, unknown>,
  headers: Record<string, string> = {},
) =>
  t.gateway.fetch('http://gateway/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ documentId, variables }),
  });

/** The manifest's HeadWithHair, by its id. */
const headWithHair = (manifest: ReadonlyMap<string, string>) =>
  [...manifest.keys()].find((id) => id.startsWith('sha256:') && manifest.get(id)!.startsWith('query HeadWithHair'))!;

describe('fast in production configurations: hot queries run compiled there too', () => {
  const production = {
    RATE_LIMIT_REQUESTS_PER_SECOND: '100000',
    RATE_LIMIT_IN_FLIGHT: '1000',
    TRUSTED_DOCUMENTS_FILE: 'src/generated/persisted-documents.json',
    TRUSTED_DOCUMENTS_ONLY: 'true',
  };

  it('with caller limits in memory and trusted documents only', async () => {
    const t = await startTestGateway({ env: production });
    try {
      const documentId = headWithHair(loadConfig(production).persistedDocuments.trustedDocuments!);
      const id = t.reference.store.headIds()[0]!;
      const answers = [];
      for (let i = 0; i < 5; i++)
        answers.push(await byId(t, documentId, { id }, { authorization: 'Bearer a-real-user' }));
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
      // Its second run onwards by compiled code (COMPILED_EXECUTION_AT_RUN=2), each charged to its caller.
      expect(await compiledRuns(t)).toBe(4);
      expect(answers[4]!.headers.get('ratelimit-remaining')).toBe(String(2 * 100_000 - 5));
    } finally {
      await t.close();
    }
  });

  describeWithRedis('with the limits and the response cache in Redis', () => {
    let redis: RedisProcess;
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(() => redis.stop());

    it('misses run compiled (each head a miss), hits need no execution', async () => {
      const t = await startTestGateway({
        env: { ...production, REDIS_URL: redis.url, RESPONSE_CACHE_TTL_MS: '60000' },
      });
      try {
        const documentId = headWithHair(loadConfig(production).persistedDocuments.trustedDocuments!);
        const heads = t.reference.store.headIds().slice(0, 4);
        for (const id of heads) expect((await byId(t, documentId, { id })).status).toBe(200);
        expect(await compiledRuns(t)).toBe(3);
        t.reset();
        for (const id of heads) expect((await byId(t, documentId, { id })).status).toBe(200);
        expect(t.calls()).toEqual([]);
        expect(await compiledRuns(t)).toBe(3);
      } finally {
        await t.close();
      }
    });
  });
});

describe('a step that fails never loses an answer, nor the telemetry stage', () => {
  /** Where the failure is, and how: thrown, or a promise that rejects. */
  type Where = 'result' | 'body' | 'headers' | 'telemetry';
  type Fault = { readonly where: Where; readonly how: 'throws' | 'rejects' } | undefined;

  /**
   * The one path with the in-flight count, the one masking and the answer body, a step that fails
   * as `fault` says in the execution's results, in the answer stage (before the body is made, or
   * after it, writing headers) or in the telemetry stage (first), a last answer step that writes
   * a header, and a telemetry step that counts the requests it saw out.
   */
  function faulty() {
    const config = loadConfig({ SHED_MAX_IN_FLIGHT: '10', SHED_EVENT_LOOP_DELAY_MS: '0' });
    const shedder = new LoadShedder(config.loadShedding, { queuedCalls: () => 0, onRefused: () => undefined });
    const inFlight = useInFlight(shedder);
    const masking = errorMasking(createLogger({ level: 'silent' }));
    const state = { fault: undefined as Fault, finished: 0, header: 'a-value' };
    const fail = (where: Where): Promise<void> | undefined => {
      if (state.fault?.where !== where) return undefined;
      const failure = new Error(`the ${where} step failed at upstream.internal:8080`);
      if (state.fault.how === 'throws') throw failure;
      return Promise.reject(failure);
    };
    const body = useAnswerBody({ maxBytes: 1_000_000, stream: { heartbeatMs: 8_000 } }).answer!;
    const policies: Policy[] = [
      { name: 'body', answer: (request, answer) => fail('body') ?? body(request, answer) },
      inFlight,
      oneOperation('{ ok }'),
      { name: 'execution', execution: () => ({ data: { ok: true } }) },
      masking,
      { name: 'faulty', result: () => fail('result'), record: () => void fail('telemetry') },
      {
        name: 'headers',
        answer: (_request, answer) => {
          answer.headers.set('x-made-by', state.header);
          return fail('headers');
        },
      },
      {
        name: 'last',
        answer: (_request, answer) => void answer.headers.set('x-last', 'written'),
        record: () => void state.finished++,
      },
    ];
    const serve = serveOf({ policies, mask: masking.mask });
    return { state, shedder, serve };
  }

  const unexpected = { message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } };
  /** What each failure is answered: the failure masked (no address, no stack), beside the data it has. */
  const answered: Record<Where, { status: number; body: unknown }> = {
    // The data stands (a mutation's says it was applied), the failure among its errors.
    result: { status: 200, body: { errors: [unexpected], data: { ok: true } } },
    // No answer made: a 500, on which the later steps still write their headers.
    body: { status: 500, body: { errors: [unexpected] } },
    // The answer made stands; the failed step's headers are what it wrote before it failed.
    headers: { status: 200, body: { data: { ok: true } } },
    telemetry: { status: 200, body: { data: { ok: true } } },
  };

  // A telemetry step is synchronous: it can only throw.
  it.each([
    ...(['result', 'body', 'headers'] as const).flatMap((where) =>
      (['throws', 'rejects'] as const).map((how) => [where, how] as const),
    ),
    ['telemetry', 'throws'] as const,
  ])('a %s step that %s: its answer as said, the request out of flight and its telemetry run', async (where, how) => {
    const { state, shedder, serve } = faulty();
    try {
      const gateway = fetchTransport(serve);
      state.fault = { where, how };
      const failed = await gateway('http://gateway/graphql', { method: 'POST' });
      expect({ status: failed.status, body: await failed.json() }).toEqual(answered[where]);
      expect(failed.headers.get('x-last')).toBe('written');
      expect([shedder.inFlight, state.finished]).toEqual([0, 1]);
      // The next request, without the fault, goes through.
      state.fault = undefined;
      const next = await gateway('http://gateway/graphql', { method: 'POST' });
      expect([next.status, await next.json()]).toEqual([200, { data: { ok: true } }]);
      expect([shedder.inFlight, state.finished]).toEqual([0, 2]);
    } finally {
      shedder.close();
    }
  });

  it('an answer HTTP cannot write (a header Node refuses): the response cut, the telemetry run', async () => {
    const { state, shedder, serve } = faulty();
    const server = createServer(nodeTransport(serve));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
      state.header = 'a\nsplit';
      await expect(fetch(url, { method: 'POST' })).rejects.toThrow();
      await until(async () => state.finished === 1, 'the telemetry stage');
      expect(shedder.inFlight).toBe(0);
      state.header = 'a-value';
      const next = await fetch(url, { method: 'POST' });
      expect([next.status, await next.json()]).toEqual([200, { data: { ok: true } }]);
    } finally {
      shedder.close();
      await new Promise<void>((resolve) => server.close(() => resolve()).closeAllConnections());
    }
  });
});

describe('the stages after the document stage', () => {
  it('are given only an operation whose document was prepared: one left without it is our fault, never run', async () => {
    const masking = errorMasking(createLogger({ level: 'silent' }));
    const ran: string[] = [];
    const policies = (prepared: boolean): Policy[] => {
      const made = oneOperation('{ ok }');
      return [
        useAnswerBody({ maxBytes: 1_000_000, stream: { heartbeatMs: 8_000 } }),
        prepared ? made : { name: 'params', intake: made.intake },
        {
          name: 'admission',
          admission: (operation) => {
            ran.push('admitted');
            ran.push(operation.definition.operation);
            return undefined;
          },
        },
        {
          name: 'execution',
          execution: (operation) => {
            ran.push(`ran ${operation.prepared.text}`);
            return { data: { ok: 1 } };
          },
        },
        masking,
      ];
    };
    const unprepared = fetchTransport(serveOf({ policies: policies(false), mask: masking.mask }));
    const refused = await unprepared('http://gateway/graphql', { method: 'POST' });
    expect(await refused.json()).toEqual({
      errors: [{ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } }],
    });
    expect(ran).toEqual([]);
    const prepared = fetchTransport(serveOf({ policies: policies(true), mask: masking.mask }));
    const answered = await prepared('http://gateway/graphql', { method: 'POST' });
    expect(await answered.json()).toEqual({ data: { ok: 1 } });
    expect(ran).toEqual(['admitted', 'query', 'ran { ok }']);
  });
});

describe('the one masking', () => {
  const { mask } = errorMasking(createLogger({ level: 'silent' }));
  it("an abort or a timeout is the client's CLIENT_CLOSED_REQUEST only once its client is gone; else our fault, masked", () => {
    for (const name of ['AbortError', 'TimeoutError']) {
      const failure = new DOMException('stopped', name);
      expect(mask(failure, true).extensions.code, name).toBe('CLIENT_CLOSED_REQUEST');
      expect([mask(failure, false).message, mask(failure, false).extensions.code], name).toEqual([
        'Unexpected error.',
        'INTERNAL_SERVER_ERROR',
      ]);
    }
  });
});

describe('the one serialisation', () => {
  it("writes a part's errors as a result's: without the extensions meant for the server (`http`, `unexpected`)", () => {
    const failure = () =>
      new GraphQLError('Unexpected error.', {
        extensions: { code: 'INTERNAL_SERVER_ERROR', unexpected: true, http: { status: 500 } },
      });
    const part = {
      incremental: [{ data: null, path: ['head'], errors: [failure()] }],
      completed: [{ id: '0', errors: [failure()] }],
      hasNext: false,
    };
    const shown = { message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } };
    expect(JSON.parse(serialise(part as ExecutionResult))).toEqual({
      incremental: [{ data: null, path: ['head'], errors: [shown] }],
      completed: [{ id: '0', errors: [shown] }],
      hasNext: false,
    });
    expect(JSON.parse(serialise({ errors: [failure()], data: null }))).toEqual({ errors: [shown], data: null });
  });
});
