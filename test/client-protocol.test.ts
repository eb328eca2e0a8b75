import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HeadShape } from '../src/reference-upstream/store.js';
import {
  type Answer,
  answer,
  type GraphQLResponse,
  jsonHeaders,
  startTestGateway,
  type TestGateway,
} from './support/gateway.js';

/*
 * The client protocol over gateway.fetch (no port): automatic persisted queries, trusted documents,
 * batches, GET (and the CSRF check of CSRF_PREVENTION), compressed request bodies. Every refusal is checked for its
 * code, its status and for making no upstream call. The real client libraries are driven over a
 * port in clients.test.ts.
 */

const MANIFEST = fileURLToPath(new URL('../src/generated/persisted-documents.json', import.meta.url));
const manifest = JSON.parse(readFileSync(MANIFEST, 'utf8')) as Record<string, string>;
/** The manifest's id and text of the operation named `name`. */
const trusted = (name: string) => {
  const [id, text] = Object.entries(manifest).find(
    ([, document]) => document.includes(` ${name}(`) || document.includes(` ${name} {`),
  )!;
  return { id, hash: id.slice('sha256:'.length), text };
};

const t = await startTestGateway();
const ids = t.reference.store.headIds();
afterAll(() => t.close());
beforeEach(() => t.reset());

/** POSTs any JSON body (one operation's parameters, or a batch). */
async function post<T = GraphQLResponse>(
  body: unknown,
  on: TestGateway = t,
  headers: Record<string, string> = {},
): Promise<Answer<T>> {
  return answer<T>(
    await on.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { ...jsonHeaders(), ...headers },
      body: JSON.stringify(body),
    }),
  );
}

/** A GET with the parameters in the query string (objects as JSON), as the GraphQL over HTTP spec says. */
async function get(
  params: Record<string, unknown>,
  headers: Record<string, string> = {},
  on: TestGateway = t,
): Promise<Answer> {
  const search = new URLSearchParams(
    Object.entries(params).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
  );
  return answer(await on.gateway.fetch(`http://gateway/graphql?${search}`, { method: 'GET', headers }));
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const persistedQuery = (hash: string) => ({ persistedQuery: { version: 1, sha256Hash: hash } });
const codes = (body: GraphQLResponse) => (body.errors ?? []).map((e) => e.extensions?.code);

/** A refusal: its status and code, no data, and no upstream call. */
function expectRefused(got: Answer, status: number, code: string, on: TestGateway = t): void {
  expect(got.status, JSON.stringify(got.body)).toBe(status);
  expect(got.body.data ?? undefined).toBeUndefined();
  expect(codes(got.body)).toEqual([code]);
  expect(on.calls()).toEqual([]);
}

const headQuery = (id: string) => `{ head(id: "${id}") { name } }`;
/** The head as the upstream holds it: the expected values. */
const upstreamHead = (id: string) =>
  t.reference.store.project(t.reference.store.findHead(id)!, HeadShape.A_EXT) as { name: string; url: string };

describe('automatic persisted queries (Apollo protocol)', () => {
  it('POST: an unknown hash is PersistedQueryNotFound (HTTP 200); hash and text register it; the hash alone then runs it', async () => {
    const query = headQuery(ids[0]!);
    const hash = sha256(query);
    const unknown = await post({ extensions: persistedQuery(hash) });
    expectRefused(unknown, 200, 'PERSISTED_QUERY_NOT_FOUND');
    expect(unknown.body.errors![0]!.message).toBe('PersistedQueryNotFound');

    const registered = await post<GraphQLResponse<{ head: { name: string } }>>({
      query,
      extensions: persistedQuery(hash),
    });
    expect(registered.body).toEqual({ data: { head: { name: upstreamHead(ids[0]!).name } } });
    expect(t.calls()).toHaveLength(1);

    t.reset();
    const hit = await post({ extensions: persistedQuery(hash) });
    expect(hit.status).toBe(200);
    expect(hit.body).toEqual(registered.body);
    expect(t.calls()).toHaveLength(1);
  });

  it('GET: the same round trip with the parameters in the URL', async () => {
    const query = headQuery(ids[1]!);
    const hash = sha256(query);
    expectRefused(await get({ extensions: persistedQuery(hash) }), 200, 'PERSISTED_QUERY_NOT_FOUND');
    expect((await get({ query, extensions: persistedQuery(hash) })).body.data).toEqual({
      head: { name: upstreamHead(ids[1]!).name },
    });
    t.reset();
    expect((await get({ extensions: persistedQuery(hash) })).body.data).toEqual({
      head: { name: upstreamHead(ids[1]!).name },
    });
    expect(t.calls()).toHaveLength(1);
  });

  it('a hash that is not the SHA-256 of the text is BAD_USER_INPUT (HTTP 400) and registers nothing', async () => {
    const query = headQuery(ids[2]!);
    const wrong = sha256(`${query} `);
    expectRefused(await post({ query, extensions: persistedQuery(wrong) }), 400, 'BAD_USER_INPUT');
    expectRefused(await post({ extensions: persistedQuery(wrong) }), 200, 'PERSISTED_QUERY_NOT_FOUND');
  });

  it('keeps at most APQ_MAX_ENTRIES queries, dropping the least recently used', async () => {
    const small = await startTestGateway({ env: { APQ_MAX_ENTRIES: '2' } });
    try {
      const queries = ids.slice(0, 3).map(headQuery);
      for (const query of queries)
        expect((await post({ query, extensions: persistedQuery(sha256(query)) }, small)).body.errors).toBeUndefined();
      small.reset();
      expectRefused(
        await post({ extensions: persistedQuery(sha256(queries[0]!)) }, small),
        200,
        'PERSISTED_QUERY_NOT_FOUND',
        small,
      );
      expect((await post({ extensions: persistedQuery(sha256(queries[2]!)) }, small)).body.data).toBeDefined();
    } finally {
      await small.close();
    }
  });
});

describe('trusted documents (TRUSTED_DOCUMENTS_FILE = the committed codegen manifest)', () => {
  const headWithHair = trusted('HeadWithHair');

  it('alongside APQ: the manifest answers its hashes and documentIds without registration; other queries still run', async () => {
    const withManifest = await startTestGateway({ env: { TRUSTED_DOCUMENTS_FILE: MANIFEST } });
    try {
      const byHash = await post<GraphQLResponse<{ head: { name: string } }>>(
        { extensions: persistedQuery(headWithHair.hash), variables: { id: ids[0] } },
        withManifest,
      );
      expect(byHash.body.errors).toBeUndefined();
      expect(byHash.body.data!.head.name).toBe(upstreamHead(ids[0]!).name);
      const byDocumentId = await post({ documentId: headWithHair.id, variables: { id: ids[0] } }, withManifest);
      expect(byDocumentId.body).toEqual(byHash.body);
      withManifest.reset();
      expectRefused(
        await post({ documentId: `sha256:${sha256('nope')}` }, withManifest),
        200,
        'PERSISTED_QUERY_NOT_FOUND',
        withManifest,
      );
      expect((await post({ query: headQuery(ids[0]!) }, withManifest)).body.errors).toBeUndefined();
    } finally {
      await withManifest.close();
    }
  });

  it('TRUSTED_DOCUMENTS_ONLY=true runs manifest documents (documentId or sha256Hash, POST or GET) and refuses anything else with PERSISTED_QUERY_ONLY and no upstream call', async () => {
    const only = await startTestGateway({ env: { TRUSTED_DOCUMENTS_FILE: MANIFEST, TRUSTED_DOCUMENTS_ONLY: 'true' } });
    try {
      const name = upstreamHead(ids[3]!).name;
      for (const params of [{ documentId: headWithHair.id }, { extensions: persistedQuery(headWithHair.hash) }]) {
        only.reset();
        const ran = await post<GraphQLResponse<{ head: { name: string } }>>(
          { ...params, variables: { id: ids[3] } },
          only,
        );
        expect(ran.body.data?.head.name, JSON.stringify(ran.body)).toBe(name);
        expect(only.calls()).toHaveLength(1);
        expect((await get({ ...params, variables: { id: ids[3] } }, {}, only)).body.data).toEqual(ran.body.data);
      }
      only.reset();
      // A query text (even the manifest's own), an APQ registration, an unknown id, no id at all.
      const query = headQuery(ids[3]!);
      for (const params of [
        { query },
        { query: headWithHair.text, variables: { id: ids[3] } },
        { query, extensions: persistedQuery(sha256(query)) },
        { extensions: persistedQuery(sha256(query)) },
        { documentId: `sha256:${sha256(query)}` },
        {},
      ]) {
        const refused = await post(params, only);
        expectRefused(refused, 400, 'PERSISTED_QUERY_ONLY', only);
        expect(refused.body.errors![0]!.message).toMatch(/^Only trusted documents run here/);
      }
      expectRefused(await get({ query }, {}, only), 400, 'PERSISTED_QUERY_ONLY', only);
    } finally {
      await only.close();
    }
  });
});

describe('batches (a JSON array of operations in one POST)', () => {
  type Batch = Answer<GraphQLResponse<Record<string, any>>[]>;

  it('answers an array in order, and a head two operations read costs one upstream call', async () => {
    const [a, b] = ids;
    const got: Batch = await post([
      { query: `query First { head(id: "${a}") { name } }` },
      {
        query: `query Second($id: ID!) { head(id: $id) { name url } other: head(id: "${a}") { name } }`,
        variables: { id: b },
      },
      { query: '{ __typename }' },
    ]);
    expect(got.status).toBe(200);
    const head = upstreamHead;
    expect(got.body).toEqual([
      { data: { head: { name: head(a!).name } } },
      { data: { head: { name: head(b!).name, url: head(b!).url }, other: { name: head(a!).name } } },
      { data: { __typename: 'Query' } },
    ]);
    // Head a is read by both operations: once. Head b once. Two operations, two reads, not three.
    expect(
      t
        .calls()
        .map((call) => call.path)
        .sort(),
    ).toEqual([`/v2/head/${a}`, `/v2/head/${b}`].sort());
  });

  it('each operation keeps its own errors and its own call budget', async () => {
    const budgeted = await startTestGateway({ env: { UPSTREAM_CALL_BUDGET: '2' } });
    try {
      const got: Batch = await post(
        [
          {
            query: `{ a: head(id: "${ids[0]}") { name } b: head(id: "${ids[1]}") { name } c: head(id: "${ids[2]}") { name } }`,
          },
          { query: headQuery('00000000-0000-4000-8000-000000000000') },
          { query: headQuery(ids[4]!) },
        ],
        budgeted,
      );
      expect(got.body).toHaveLength(3);
      expect(codes(got.body[0]!)).toEqual(['UPSTREAM_BUDGET_EXCEEDED']);
      expect(got.body[0]!.data).toBeUndefined();
      expect(got.body[1]!.data).toEqual({ head: null });
      expect(codes(got.body[1]!)).toEqual(['NOT_FOUND']);
      expect(got.body[2]).toEqual({ data: { head: { name: upstreamHead(ids[4]!).name } } });
      // The refused operation made no call; the other two one each.
      expect(budgeted.calls()).toHaveLength(2);
    } finally {
      await budgeted.close();
    }
  });

  it('a batch over MAX_BATCH (default 10) is HTTP 400 BATCH_TOO_LARGE before any operation runs', async () => {
    const operation = { query: headQuery(ids[0]!) };
    expectRefused(await post(Array.from({ length: 11 }, () => operation)), 400, 'BATCH_TOO_LARGE');
    expect((await post(Array.from({ length: 10 }, () => operation))).status).toBe(200);
    t.reset();
    const three = await startTestGateway({ env: { MAX_BATCH: '3' } });
    try {
      const refused = await post(
        Array.from({ length: 4 }, () => operation),
        three,
      );
      expectRefused(refused, 400, 'BATCH_TOO_LARGE', three);
      expect(refused.body.errors![0]!.message).toBe('A batch may carry at most 3 operations; this one has 4.');
      expectRefused(await post([], three), 400, 'BAD_REQUEST', three);
    } finally {
      await three.close();
    }
  });

  it('the operations of a batch share one request id, echoed in x-request-id and sent upstream', async () => {
    const got = await post([{ query: headQuery(ids[0]!) }, { query: headQuery(ids[1]!) }], t, {
      'x-request-id': 'batch-1',
    });
    expect(got.headers.get('x-request-id')).toBe('batch-1');
    expect(t.calls().map((call) => call.headers['x-request-id'])).toEqual(['batch-1', 'batch-1']);
  });

  it('an entry that is no object (null, a number, a list) is that entry refused, HTTP 400 BAD_REQUEST; the others run', async () => {
    const got: Batch = await post([null, { query: headQuery(ids[0]!) }, 7, []]);
    expect(got.status).toBe(200);
    expect(got.body).toHaveLength(4);
    expect(got.body.map((entry) => entry.errors?.[0]?.message)).toEqual([
      'Expected params to be an object but given null.',
      undefined,
      'Expected params to be an object but given number.',
      'Expected params to be an object but given array.',
    ]);
    expect([0, 2, 3].map((i) => codes(got.body[i]!))).toEqual([['BAD_REQUEST'], ['BAD_REQUEST'], ['BAD_REQUEST']]);
    expect(got.body[1]).toEqual({ data: { head: { name: upstreamHead(ids[0]!).name } } });
    expect(t.calls()).toHaveLength(1);
  });

  it('an operation with @defer in a batch (one JSON array) is answered whole, whatever the client takes', async () => {
    const deferred = `{ head(id: "${ids[2]}") { name ... @defer { url } } }`;
    for (const accept of ['application/json', 'multipart/mixed, application/json']) {
      const got: Batch = await post([{ query: deferred }, { query: '{ __typename }' }], t, { accept });
      expect(got.status, accept).toBe(200);
      expect(got.headers.get('content-type'), accept).toMatch(/^application\/json/);
      expect(got.body, accept).toEqual([
        { data: { head: { name: upstreamHead(ids[2]!).name, url: upstreamHead(ids[2]!).url } } },
        { data: { __typename: 'Query' } },
      ]);
    }
  });
});

describe('GET queries', () => {
  it('runs a GET query with no header at all (no CSRF preflight header by default); a mutation over GET is 405', async () => {
    const got = await get({ query: headQuery(ids[0]!) });
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ data: { head: { name: upstreamHead(ids[0]!).name } } });
    expect(t.calls()).toHaveLength(1);
    t.reset();
    expectRefused(
      await get({ query: 'mutation { login(input: { username: "a", password: "b" }) { accessToken } }' }),
      405,
      'BAD_REQUEST',
    );
  });
});

describe('CSRF_PREVENTION=true', () => {
  let csrf: TestGateway;
  beforeAll(async () => {
    csrf = await startTestGateway({ env: { CSRF_PREVENTION: 'true' } });
  });
  afterAll(() => csrf.close());
  beforeEach(() => csrf.reset());

  it.each<Record<string, string>>([
    { 'x-graphql-csrf': '1' },
    { 'apollo-require-preflight': 'true' },
    { 'x-apollo-operation-name': 'Head' },
    { 'content-type': 'application/json' },
  ])('runs a GET query carrying %o', async (headers) => {
    const got = await get({ query: headQuery(ids[0]!) }, headers, csrf);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ data: { head: { name: upstreamHead(ids[0]!).name } } });
  });

  it('refuses a GET without any of them (403 BAD_REQUEST, naming them), and a mutation over GET even with one (405)', async () => {
    const refused = await get({ query: headQuery(ids[0]!) }, {}, csrf);
    expectRefused(refused, 403, 'BAD_REQUEST', csrf);
    expect(refused.body.errors![0]!.message).toBe(
      'A GET, or a POST with a form or text/plain content type, must carry one of the headers x-graphql-csrf, x-graphql-yoga-csrf, apollo-require-preflight, x-apollo-operation-name (any value), or Content-Type: application/json.',
    );
    expectRefused(
      await get(
        { query: 'mutation { login(input: { username: "a", password: "b" }) { accessToken } }' },
        { 'apollo-require-preflight': 'true' },
        csrf,
      ),
      405,
      'BAD_REQUEST',
      csrf,
    );
  });
});

describe('compressed request bodies', () => {
  const postEncoded = (body: Uint8Array, encoding: string, on: TestGateway = t) =>
    on.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { ...jsonHeaders(), 'content-encoding': encoding },
      body,
    });

  it('accepts gzip and deflate bodies', async () => {
    const json = JSON.stringify({ query: headQuery(ids[0]!) });
    for (const [encoding, body] of [
      ['gzip', gzipSync(json)],
      ['deflate', deflateSync(json)],
    ] as const) {
      const got = await answer(await postEncoded(body, encoding));
      expect(got.body, encoding).toEqual({ data: { head: { name: upstreamHead(ids[0]!).name } } });
    }
    expect(t.calls()).toHaveLength(2);
  });

  it('counts the inflated bytes against MAX_BODY_BYTES: a small gzip that inflates past the cap is 413', async () => {
    // 200 KB of JSON (a long variable) in ~1 KB of gzip; the cap is 100,000 bytes.
    const json = JSON.stringify({ query: headQuery(ids[0]!), variables: { pad: ' '.repeat(200_000) } });
    const body = gzipSync(json);
    expect(body.byteLength).toBeLessThan(2_000);
    expectRefused(await answer(await postEncoded(body, 'gzip')), 413, 'PAYLOAD_TOO_LARGE');
  });

  it('a decompression bomb (10 MB of gzip inflating to 10 GB) is 413, not an out-of-memory', async () => {
    const roomy = await startTestGateway({ env: { MAX_BODY_BYTES: '20000000' } });
    try {
      // Concatenated gzip members inflate one after the other: 160 x (64 MB of zeros in ~64 KB).
      const member = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
      const bomb = Buffer.concat(Array.from({ length: 160 }, () => member));
      expect(bomb.byteLength).toBeLessThan(20_000_000);
      const before = process.memoryUsage().rss;
      expectRefused(await answer(await postEncoded(bomb, 'gzip', roomy)), 413, 'PAYLOAD_TOO_LARGE', roomy);
      // Inflated whole it would be 10 GB; counted, it stops at the cap plus one chunk.
      expect(process.memoryUsage().rss - before).toBeLessThan(1024 * 1024 * 1024);
    } finally {
      await roomy.close();
    }
  });

  it('an encoding it cannot decode is 415 with no upstream call, logged and counted as a refused operation', async () => {
    const logged = t.logLines.length;
    const got = await postEncoded(new TextEncoder().encode(JSON.stringify({ query: headQuery(ids[0]!) })), 'compress');
    expect(got.status).toBe(415);
    expect(t.calls()).toEqual([]);
    const requestId = got.headers.get('x-request-id');
    expect(requestId).toEqual(expect.any(String));
    const lines = t.logLines
      .slice(logged)
      .map((line) => JSON.parse(line))
      .filter((line) => line.msg === 'graphql operation');
    expect(lines.map((line) => [line.requestId, line.outcome, line.upstreamCalls])).toEqual([
      [requestId, 'refused', 0],
    ]);
  });
});
