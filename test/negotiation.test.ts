import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Answer, answer, jsonHeaders, startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * What a client accepts, agreed before anything runs (issue 22): Accept and Accept-Encoding with
 * their q-values, content codings in any case, and every answer with an error status given before
 * execution, with no upstream call.
 */

let t: TestGateway;
let url: string;
let ids: string[];
beforeAll(async () => {
  // Each operation's own upstream calls are counted: identical concurrent reads would share one (UPSTREAM_DEDUPE).
  // TRUST_PROXY: the caller the upstream-call rate refuses has an address of its own (a made-up token shares its
  // address's).
  t = await startTestGateway({
    env: { RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '50', UPSTREAM_DEDUPE: 'false', TRUST_PROXY: 'true' },
  });
  url = await t.listen();
  ids = t.reference.store.headIds();
});
afterAll(() => t.close());
beforeEach(() => t.reset());

const oneCall = JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' });
const deferred = (id: string, condition = '') =>
  JSON.stringify({ query: `{ head(id: "${id}") { name ... @defer${condition} { headMetadata } } }` });

async function send(body: string | Uint8Array, headers: Record<string, string>): Promise<Answer> {
  return answer(
    await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    }),
  );
}

const codeOf = (a: Answer) => a.body.errors?.[0]?.extensions?.code;

describe('Accept', () => {
  it.each([
    ['application/json;q=0, application/graphql-response+json', 'application/graphql-response+json'],
    ['application/graphql-response+json;q=0.5, application/json', 'application/json'],
    ['*/*;q=0.5, application/json;q=0', 'application/graphql-response+json'],
    ['application/json; charset=UTF-8', 'application/json'],
    ['application/json; charset="utf-8"', 'application/json'],
  ])('honours q-values: %s is answered as %s', async (accept, type) => {
    const a = await send(oneCall, { accept });
    expect(a.status).toBe(200);
    expect(a.headers.get('content-type')).toBe(`${type}; charset=utf-8`);
    expect(a.body).toEqual({ data: { heads: { totalCount: expect.any(Number) } } });
  });

  it.each([
    'application/json;q=0',
    'text/html',
    '*/*;q=0',
    'application/json; charset=latin1',
    'application/json; charset="latin1"',
  ])(
    'refuses %s, which names nothing the gateway answers in, with 406 NOT_ACCEPTABLE before any upstream call',
    async (accept) => {
      const a = await send(oneCall, { accept });
      expect(a.status).toBe(406);
      expect(a.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(a.body).toEqual({
        errors: [
          {
            message: expect.stringMatching(/^The Accept header names no media type the gateway answers in/),
            extensions: { code: 'NOT_ACCEPTABLE' },
          },
        ],
      });
      expect(t.calls()).toEqual([]);
    },
  );

  it.each([
    'application/json',
    'application/graphql-response+json, application/json',
    'application/json, multipart/mixed;q=0',
  ])(
    'answers @defer asked for with %s (no type that carries parts) whole, in one JSON answer: HTTP 200, the deferred fields included, one read',
    async (accept) => {
      const a = await send(deferred(ids[0]!), { accept });
      expect(a.status).toBe(200);
      expect(a.headers.get('content-type')).toMatch(/^application\/(graphql-response\+)?json/);
      expect(a.body).toEqual({ data: { head: { name: expect.any(String), headMetadata: expect.anything() } } });
      // As without @defer: the deferred fields are read with the rest.
      expect(t.calls().map((call) => call.operation)).toEqual(['getHeadExtById']);
    },
  );

  it('answers @stream asked for with JSON alone with the whole list', async () => {
    const a = await send(
      JSON.stringify({
        query: `query($ids: [ID!]!) { nodes(ids: $ids) @stream(initialCount: 1) { id } }`,
        variables: { ids: ids.slice(0, 3).map((id) => Buffer.from(`Head:${id}`).toString('base64')) },
      }),
      { accept: 'application/json' },
    );
    expect(a.status).toBe(200);
    expect(a.body.data?.nodes).toHaveLength(3);
    expect(a.body.errors).toBeUndefined();
  });

  it("runs @defer turned off by its `if` as one JSON answer, and Apollo's multipart/mixed;deferSpec=20220824 in parts", async () => {
    const off = await send(deferred(ids[0]!, '(if: false)'), { accept: 'application/json' });
    expect(off.status).toBe(200);
    expect(off.body.data).toEqual({ head: { name: expect.any(String), headMetadata: expect.anything() } });
    const byVariable = await send(
      JSON.stringify({
        query: `query($d: Boolean!) { head(id: "${ids[0]}") { name ... @defer(if: $d) { headMetadata } } }`,
        variables: { d: false },
      }),
      { accept: 'application/json' },
    );
    expect(byVariable.status).toBe(200);
    const apollo = await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'multipart/mixed;deferSpec=20220824, application/json' },
      body: deferred(ids[1]!),
    });
    expect(apollo.status).toBe(200);
    expect(apollo.headers.get('content-type')).toMatch(/^multipart\/mixed/);
    expect(await apollo.text()).toContain('"hasNext":false');
  });
});

describe('answers with an error status make no upstream call', () => {
  const fifty = () => JSON.stringify({ query: `{ nodes(ids: ${JSON.stringify(ids.slice(0, 50))}) { id } }` });

  it.each([
    [
      '415: a content type the gateway does not read',
      () => send(oneCall, { 'content-type': 'application/xml', accept: 'application/graphql-response+json' }),
      415,
      undefined,
    ],
    [
      '415: a content coding it does not decode',
      () => send(oneCall, { 'content-encoding': 'compress', accept: 'application/graphql-response+json' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      '400: a body that is not JSON',
      () => send('{ "query": ', { accept: 'application/graphql-response+json' }),
      400,
      'BAD_REQUEST',
    ],
    [
      '400: no query',
      () => send(JSON.stringify({ variables: {} }), { accept: 'application/graphql-response+json' }),
      400,
      'BAD_REQUEST',
    ],
    [
      '400: a document that does not validate',
      () =>
        send(JSON.stringify({ query: '{ heads(first: 1) { nope } }' }), {
          accept: 'application/graphql-response+json',
        }),
      400,
      'GRAPHQL_VALIDATION_FAILED',
    ],
  ])('%s', async (_, request, status, code) => {
    const a = await request();
    expect(a.status).toBe(status);
    expect(codeOf(a)).toBe(code);
    expect(t.calls()).toEqual([]);
  });

  it('429: an operation over the upstream-call rate, refused with its plan before execution', async () => {
    const caller = { ...jsonHeaders(), authorization: 'Bearer calls-caller', 'x-forwarded-for': '203.0.113.50' };
    const answers = await Promise.all([send(fifty(), caller), send(fifty(), caller), send(fifty(), caller)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 429]);
    expect(t.calls()).toHaveLength(100);
  });
});

describe('Content-Encoding of a request body', () => {
  it.each(['GZIP', 'Gzip', ' gzip ', 'x-gzip', 'gzip, identity'])(
    'decodes %j as gzip (codings are case-insensitive)',
    async (coding) => {
      const a = await send(gzipSync(oneCall), { ...jsonHeaders(), 'content-encoding': coding });
      expect(a.status).toBe(200);
      expect(a.body.data).toEqual({ heads: { totalCount: expect.any(Number) } });
    },
  );

  it('refuses two codings at once (the decoder applies one) with 415 and no upstream call', async () => {
    const a = await send(gzipSync(gzipSync(oneCall)), { ...jsonHeaders(), 'content-encoding': 'gzip, gzip' });
    expect(a.status).toBe(415);
    expect(codeOf(a)).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(t.calls()).toEqual([]);
  });
});

describe('Accept-Encoding (over HTTP)', () => {
  const page = JSON.stringify({ query: '{ heads(first: 50) { nodes { id name url } } }' });
  const overHttp = async (body: string, acceptEncoding: string) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { ...jsonHeaders(), 'accept-encoding': acceptEncoding },
      body,
    });
    const text = await response.text();
    return {
      status: response.status,
      coding: response.headers.get('content-encoding'),
      vary: response.headers.get('vary'),
      requestId: response.headers.get('x-request-id'),
      text,
    };
  };

  it('never uses a coding given q=0, and compresses even a small answer when identity is refused', async () => {
    expect((await overHttp(page, 'br;q=0, gzip')).coding).toBe('gzip');
    expect((await overHttp(page, 'gzip;q=0')).coding).toBeNull();
    const small = JSON.stringify({ query: '{ __typename }' });
    expect((await overHttp(small, 'gzip')).coding).toBeNull();
    expect((await overHttp(small, 'identity;q=0, gzip')).coding).toBe('gzip');
    expect((await overHttp(small, '*;q=0, br')).coding).toBe('br');
  });

  it.each(['identity;q=0', '*;q=0', 'gzip;q=0, identity;q=0'])(
    'answers %s, which refuses every coding, 406 NOT_ACCEPTABLE before any upstream call (the intake stage, on the one path)',
    async (acceptEncoding) => {
      const a = await overHttp(oneCall, acceptEncoding);
      expect(a.status).toBe(406);
      // Answered by the stages, not beside them: it carries its request id as every answer does.
      expect(a.requestId).toMatch(/\S/);
      expect(JSON.parse(a.text)).toEqual({
        errors: [
          {
            message: expect.stringMatching(/^The Accept-Encoding header refuses every content coding/),
            extensions: { code: 'NOT_ACCEPTABLE' },
          },
        ],
      });
      expect(a.vary).toBe('Accept-Encoding');
      expect(t.calls()).toEqual([]);
    },
  );
});
