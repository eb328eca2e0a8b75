import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { ApolloClient, type DocumentNode, gql, HttpLink, InMemoryCache, type TypedDocumentNode } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { Client, cacheExchange, fetchExchange } from '@urql/core';
import { type ClientError, GraphQLClient } from 'graphql-request';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HeadWithHairDocument } from '../src/generated/graphql.js';
import { HeadShape } from '../src/reference-upstream/store.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The client libraries our users have, driven as their apps drive them, against the gateway on a
 * loopback port (compression included, as main.ts serves it) and the reference upstream. Each
 * client's HTTP requests are recorded through its `fetch` option; upstream calls are counted at
 * the reference upstream.
 */

const MANIFEST = fileURLToPath(new URL('../src/generated/persisted-documents.json', import.meta.url));

let t: TestGateway;
let url: string;
let ids: string[];

beforeAll(async () => {
  t = await startTestGateway();
  url = await t.listen();
  ids = t.reference.store.headIds();
});
afterAll(() => t.close());
beforeEach(() => t.reset());

const upstreamHead = (id: string) =>
  t.reference.store.project(t.reference.store.findHead(id)!, HeadShape.A_EXT) as { name: string; url: string };

interface Sent {
  method: string;
  /** The parsed JSON body of a POST, or the parameters of a GET (objects parsed). */
  params: unknown;
  status: number;
}

/** A `fetch` for a client library that records what it sent and the status it got. */
function recordingFetch(): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const recording: typeof fetch = async (input, init) => {
    const target = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = init?.method ?? 'GET';
    const params =
      method === 'GET'
        ? Object.fromEntries(
            [...target.searchParams].map(([k, v]) => [k, k === 'query' || k === 'operationName' ? v : JSON.parse(v)]),
          )
        : JSON.parse(String(init?.body));
    const response = await fetch(input, init);
    sent.push({ method, params, status: response.status });
    return response;
  };
  return { fetch: recording, sent };
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

type HeadData = { head: { id: string; name: string; url?: string; uuid?: string } | null };

const HEAD: TypedDocumentNode<HeadData, { id: string }> = gql`
  query Head($id: ID!) {
    head(id: $id) {
      id
      name
      url
    }
  }
`;

describe('Apollo Client 4', () => {
  it('persisted-queries link: hash only -> PersistedQueryNotFound -> retried with the text; a second client then hits with the hash alone', async () => {
    const first = recordingFetch();
    const apollo = () =>
      new ApolloClient({
        cache: new InMemoryCache(),
        link: new PersistedQueryLink({ sha256 }).concat(new HttpLink({ uri: url, fetch: first.fetch })),
      });
    const result = await apollo().query({ query: HEAD, variables: { id: ids[0]! } });
    expect(result.data?.head).toMatchObject({ name: upstreamHead(ids[0]!).name, url: upstreamHead(ids[0]!).url });
    expect(
      first.sent.map((s) => ({ method: s.method, hasQuery: 'query' in (s.params as object), status: s.status })),
    ).toEqual([
      { method: 'POST', hasQuery: false, status: 200 },
      { method: 'POST', hasQuery: true, status: 200 },
    ]);
    expect(t.calls()).toHaveLength(1);

    t.reset();
    first.sent.length = 0;
    const again = await apollo().query({ query: HEAD, variables: { id: ids[0]! } });
    expect(again.data).toEqual(result.data);
    expect(first.sent.map((s) => ({ method: s.method, hasQuery: 'query' in (s.params as object) }))).toEqual([
      { method: 'POST', hasQuery: false },
    ]);
    expect(t.calls()).toHaveLength(1);
  });

  it('persisted-queries link with useGETForHashedQueries: the hash alone over GET hits', async () => {
    const recorder = recordingFetch();
    const link = new PersistedQueryLink({ sha256, useGETForHashedQueries: true }).concat(
      new HttpLink({ uri: url, fetch: recorder.fetch }),
    );
    const client = () => new ApolloClient({ cache: new InMemoryCache(), link });
    const HEAD_UUID: TypedDocumentNode<HeadData, { id: string }> =
      gql`query HeadUuid($id: ID!) { head(id: $id) { id uuid name } }`;
    const first = await client().query({ query: HEAD_UUID, variables: { id: ids[1]! } });
    expect(first.data?.head).toMatchObject({ name: upstreamHead(ids[1]!).name });
    const again = await client().query({ query: HEAD_UUID, variables: { id: ids[1]! } });
    expect(again.data).toEqual(first.data);
    // GET hash (not found), POST with the text (registers), then GET hash (hit).
    expect(recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['GET 200', 'POST 200', 'GET 200']);
    expect(t.calls()).toHaveLength(2);
  });

  it('BatchHttpLink: two queries in one POST, answered in order; the head both read costs one upstream call', async () => {
    const recorder = recordingFetch();
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: new BatchHttpLink({ uri: url, fetch: recorder.fetch, batchInterval: 20 }),
    });
    const [a, b] = ids;
    const [one, two] = await Promise.all([
      client.query({ query: HEAD, variables: { id: a! } }),
      client.query({
        query: gql`query Pair($a: ID!, $b: ID!) { first: head(id: $a) { id name } second: head(id: $b) { id name } }`,
        variables: { a, b },
      }),
    ]);
    expect(one.data?.head).toMatchObject({ name: upstreamHead(a!).name });
    expect(two.data).toMatchObject({ first: { name: upstreamHead(a!).name }, second: { name: upstreamHead(b!).name } });
    expect(recorder.sent).toHaveLength(1);
    expect(recorder.sent[0]!.params).toHaveLength(2);
    expect(
      t
        .calls()
        .map((call) => call.path)
        .sort(),
    ).toEqual([`/v2/head/${a}`, `/v2/head/${b}`].sort());
  });

  it('HttpLink with useGETForQueries: queries go as GET, mutations as POST', async () => {
    const recorder = recordingFetch();
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: new HttpLink({ uri: url, fetch: recorder.fetch, useGETForQueries: true }),
    });
    const got = await client.query({ query: HEAD, variables: { id: ids[2]! } });
    expect(got.data?.head).toMatchObject({ name: upstreamHead(ids[2]!).name });
    const login = await client.mutate({
      mutation: gql`mutation { login(input: { username: "demo", password: "demo-password" }) { tokenType } }`,
    });
    expect(login.data).toEqual({ login: { __typename: 'LoginPayload', tokenType: 'bearer' } });
    expect(recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['GET 200', 'POST 200']);
  });
});

/**
 * urql on its defaults (queries as GET: `preferGetMethod: 'within-url-limit'`) unless `options` say otherwise,
 * recording what it sends.
 */
const urql = (options: Partial<ConstructorParameters<typeof Client>[0]> = {}) => {
  const recorder = recordingFetch();
  return {
    recorder,
    client: new Client({ url, exchanges: [cacheExchange, fetchExchange], fetch: recorder.fetch, ...options }),
  };
};
const URQL_HEAD = `query Head($id: ID!) { head(id: $id) { id name } }`;
const LOGIN = `mutation { login(input: { username: "demo", password: "demo-password" }) { tokenType } }`;

/** The manifest id codegen embedded in a generated document (`sha256:<hex>`). */
const manifestId = (document: DocumentNode) => (document as { __meta__?: { hash: string } }).__meta__!.hash;

/** A GET as curl sends it: the parameters in the URL, no header at all. */
const plainGet = (endpoint: string, params: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${endpoint}?${new URLSearchParams(params)}`, { headers });

describe('urql', () => {
  it('the default client sends queries as GET with no extra header: answered, one upstream call; mutations go as POST', async () => {
    const { client, recorder } = urql();
    const result = await client.query(URQL_HEAD, { id: ids[0] }).toPromise();
    expect(result.error).toBeUndefined();
    expect(result.data?.head).toMatchObject({ name: upstreamHead(ids[0]!).name });
    expect(recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['GET 200']);
    expect(t.calls()).toHaveLength(1);
    const login = await client.mutation(LOGIN, {}).toPromise();
    expect(login.data).toEqual({ login: { __typename: 'LoginPayload', tokenType: 'bearer' } });
    expect(recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['GET 200', 'POST 200']);
  });

  it('preferGetMethod: false sends queries as POST', async () => {
    const post = urql({ preferGetMethod: false });
    expect((await post.client.query(URQL_HEAD, { id: ids[1] }).toPromise()).data?.head).toMatchObject({
      name: upstreamHead(ids[1]!).name,
    });
    expect(post.recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['POST 200']);
    expect(t.calls()).toHaveLength(1);
  });
});

describe('graphql-request 7', () => {
  const HEAD_QUERY = `query Head($id: ID!) { head(id: $id) { id name url } }`;

  it("method: 'GET' with no extra header: the query and its variables in the URL, answered", async () => {
    const recorder = recordingFetch();
    const client = new GraphQLClient(url, { method: 'GET', fetch: recorder.fetch });
    const data = await client.request<HeadData>(HEAD_QUERY, { id: ids[2]! });
    expect(data.head).toMatchObject({ name: upstreamHead(ids[2]!).name, url: upstreamHead(ids[2]!).url });
    expect(recorder.sent).toEqual([
      { method: 'GET', params: expect.objectContaining({ query: HEAD_QUERY, variables: { id: ids[2] } }), status: 200 },
    ]);
    expect(t.calls()).toHaveLength(1);
  });

  it("sends a mutation as POST even with method: 'GET'; a mutation over GET (curl) is 405 with no upstream call", async () => {
    const recorder = recordingFetch();
    const client = new GraphQLClient(url, { method: 'GET', fetch: recorder.fetch });
    expect(await client.request(LOGIN)).toEqual({ login: { tokenType: 'bearer' } });
    expect(recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['POST 200']);
    t.reset();
    const refused = await plainGet(url, { query: LOGIN });
    expect(refused.status).toBe(405);
    expect(
      ((await refused.json()) as { errors: { extensions: { code: string } }[] }).errors.map((e) => e.extensions.code),
    ).toEqual(['BAD_REQUEST']);
    expect(t.calls()).toEqual([]);
  });
});

describe('compressed responses', () => {
  const PAGE = '{ heads(first: 100) { nodes { id uuid name url createdAt hair { name url style } } } }';
  const raw = async (
    acceptEncoding: string | undefined,
    query = PAGE,
    accept = 'application/graphql-response+json',
  ) => {
    const response = await request(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept,
        ...(acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding }),
      },
      body: JSON.stringify({ query }),
    });
    return {
      status: response.statusCode,
      headers: response.headers,
      bytes: Buffer.from(await response.body.arrayBuffer()),
    };
  };

  it('a 100-head page: gzip and brotli as Accept-Encoding asks, each decoding to the uncompressed answer', async () => {
    const plain = await raw(undefined);
    expect(plain.headers['content-encoding']).toBeUndefined();
    const answer = JSON.parse(plain.bytes.toString());
    expect(answer.data.heads.nodes).toHaveLength(100);
    const gzip = await raw('gzip');
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gzip.headers.vary).toMatch(/accept-encoding/i);
    expect(JSON.parse(gunzipSync(gzip.bytes).toString())).toEqual(answer);
    // Brotli when the client prefers it, or on a tie (browsers send "gzip, deflate, br").
    for (const accepted of ['br', 'gzip, deflate, br', 'gzip;q=0.5, br;q=1']) {
      const br = await raw(accepted);
      expect(br.headers['content-encoding'], accepted).toBe('br');
      expect(JSON.parse(brotliDecompressSync(br.bytes).toString())).toEqual(answer);
      expect(br.bytes.byteLength).toBeLessThan(gzip.bytes.byteLength);
    }
    expect(gzip.bytes.byteLength).toBeLessThan(plain.bytes.byteLength / 3);
  });

  it('leaves a tiny answer uncompressed, still saying it varies by Accept-Encoding', async () => {
    const tiny = await raw('gzip, br', '{ __typename }');
    expect(tiny.headers['content-encoding']).toBeUndefined();
    expect(tiny.headers.vary).toMatch(/accept-encoding/i);
    expect(JSON.parse(tiny.bytes.toString())).toEqual({ data: { __typename: 'Query' } });
  });

  it('sends a streamed answer (text/event-stream) as it is, whatever the client accepts: a stream holds no compressor', async () => {
    const stream = await raw('gzip, deflate, br, zstd', PAGE, 'text/event-stream');
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(stream.headers['content-encoding']).toBeUndefined();
    const events = stream.bytes.toString();
    expect(events).toMatch(/^event: next\ndata: \{"data":\{"heads":/m);
    expect(events).toMatch(/^event: complete$/m);
  });

  it('serves GraphiQL compressed with an ETag; revalidation is a 304 without the page', async () => {
    const page = await request(url, { headers: { accept: 'text/html', 'accept-encoding': 'gzip, deflate, br' } });
    const compressed = Buffer.from(await page.body.arrayBuffer());
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-encoding']).toBe('br');
    expect(page.headers['cache-control']).toBe('no-cache');
    const etag = String(page.headers.etag);
    expect(etag).toMatch(/^W\/"/);
    const html = brotliDecompressSync(compressed).toString();
    expect(html).toContain('<title>Avatar Head gateway</title>');
    expect(compressed.byteLength).toBeLessThan(html.length / 3);

    const revalidated = await request(url, {
      headers: { accept: 'text/html', 'accept-encoding': 'br', 'if-none-match': etag },
    });
    expect(revalidated.statusCode).toBe(304);
    expect(revalidated.headers.etag).toBe(etag);
    expect((await revalidated.body.arrayBuffer()).byteLength).toBe(0);
  });
});

describe('trusted documents only (TRUSTED_DOCUMENTS_ONLY=true, the committed manifest)', () => {
  let only: TestGateway;
  let onlyUrl: string;
  beforeAll(async () => {
    only = await startTestGateway({ env: { TRUSTED_DOCUMENTS_FILE: MANIFEST, TRUSTED_DOCUMENTS_ONLY: 'true' } });
    onlyUrl = await only.listen();
  });
  afterAll(() => only.close());

  /** The manifest id codegen embedded in a generated document, as Apollo's persisted-queries link sends it. */
  const manifestHash = (document: DocumentNode) =>
    ((document as { __meta__?: { hash: string } }).__meta__?.hash ?? '').replace(/^sha256:/, '');

  it('Apollo with the manifest hashes runs a generated operation; an operation not in the manifest is refused with PERSISTED_QUERY_ONLY and no upstream call', async () => {
    const recorder = recordingFetch();
    const trustedClient = new ApolloClient({
      cache: new InMemoryCache(),
      link: new PersistedQueryLink({ generateHash: manifestHash }).concat(
        new HttpLink({ uri: onlyUrl, fetch: recorder.fetch }),
      ),
    });
    only.reset();
    const ran = await trustedClient.query({ query: HeadWithHairDocument, variables: { id: ids[5]! } });
    expect(ran.data?.head?.name).toBe(upstreamHead(ids[5]!).name);
    expect(recorder.sent.map((s) => 'query' in (s.params as object))).toEqual([false]);
    expect(only.calls()).toHaveLength(1);

    only.reset();
    const adHoc = new ApolloClient({
      cache: new InMemoryCache(),
      link: new PersistedQueryLink({ sha256 }).concat(new HttpLink({ uri: onlyUrl })),
    });
    const refused = await adHoc.query({ query: HEAD, variables: { id: ids[5]! }, errorPolicy: 'all' });
    expect(refused.data).toBeUndefined();
    expect(JSON.stringify(refused.error)).toContain('PERSISTED_QUERY_ONLY');
    const plain = new ApolloClient({ cache: new InMemoryCache(), link: new HttpLink({ uri: onlyUrl }) });
    const refusedText = await plain.query({ query: HEAD, variables: { id: ids[5]! }, errorPolicy: 'all' });
    expect(JSON.stringify(refusedText.error)).toContain('PERSISTED_QUERY_ONLY');
    expect(only.calls()).toEqual([]);
  });

  it('a plain GET naming a manifest document by documentId (as curl sends it, no header) is answered', async () => {
    only.reset();
    const response = await plainGet(onlyUrl, {
      documentId: manifestId(HeadWithHairDocument),
      variables: JSON.stringify({ id: ids[6] }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data: { head: { uuid: string; name: string; hair: unknown } } };
    expect(body.data.head).toMatchObject({ uuid: ids[6], name: upstreamHead(ids[6]!).name });
    expect(only.calls()).toHaveLength(1);
  });
});

describe('CSRF_PREVENTION=true (behind a proxy that turns cookies into tokens)', () => {
  let csrf: TestGateway;
  let csrfUrl: string;
  beforeAll(async () => {
    csrf = await startTestGateway({ env: { CSRF_PREVENTION: 'true', TRUSTED_DOCUMENTS_FILE: MANIFEST } });
    csrfUrl = await csrf.listen();
  });
  afterAll(() => csrf.close());
  beforeEach(() => csrf.reset());

  const refusal =
    'A GET, or a POST with a form or text/plain content type, must carry one of the headers x-graphql-csrf, x-graphql-yoga-csrf, apollo-require-preflight, x-apollo-operation-name (any value), or Content-Type: application/json.';

  it('a GET without a preflight header is 403 BAD_REQUEST naming the headers that pass, with no upstream call: urql on its defaults, graphql-request, curl', async () => {
    const { client, recorder } = urql({ url: csrfUrl });
    const result = await client.query(URQL_HEAD, { id: ids[0] }).toPromise();
    expect(result.data).toBeUndefined();
    expect(result.error?.graphQLErrors.map((e) => [e.extensions.code, e.message])).toEqual([['BAD_REQUEST', refusal]]);
    expect(recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['GET 403']);

    const refused = await new GraphQLClient(csrfUrl, { method: 'GET' })
      .request(URQL_HEAD, { id: ids[0] })
      .catch((error: unknown) => error);
    expect((refused as ClientError).response.status).toBe(403);
    expect((refused as ClientError).response.errors?.map((e) => e.message)).toEqual([refusal]);

    const curl = await plainGet(csrfUrl, {
      documentId: manifestId(HeadWithHairDocument),
      variables: JSON.stringify({ id: ids[0] }),
    });
    expect(curl.status).toBe(403);
    expect(await curl.json()).toEqual({ errors: [{ message: refusal, extensions: { code: 'BAD_REQUEST' } }] });
    expect(csrf.calls()).toEqual([]);
  });

  it('with one of the headers each of them is answered', async () => {
    const { client, recorder } = urql({ url: csrfUrl, fetchOptions: { headers: { 'x-graphql-csrf': '1' } } });
    expect((await client.query(URQL_HEAD, { id: ids[0] }).toPromise()).data?.head).toMatchObject({
      name: upstreamHead(ids[0]!).name,
    });
    expect(recorder.sent.map((s) => `${s.method} ${s.status}`)).toEqual(['GET 200']);
    const data = await new GraphQLClient(csrfUrl, {
      method: 'GET',
      headers: { 'apollo-require-preflight': 'true' },
    }).request<HeadData>(URQL_HEAD, { id: ids[1]! });
    expect(data.head).toMatchObject({ name: upstreamHead(ids[1]!).name });
    const curl = await plainGet(
      csrfUrl,
      { documentId: manifestId(HeadWithHairDocument), variables: JSON.stringify({ id: ids[2] }) },
      { 'x-graphql-csrf': '1' },
    );
    expect(curl.status).toBe(200);
    expect(((await curl.json()) as { data: { head: { name: string } } }).data.head.name).toBe(
      upstreamHead(ids[2]!).name,
    );
    expect(csrf.calls()).toHaveLength(3);
  });
});
