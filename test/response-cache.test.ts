import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Agent, fetch as httpFetch } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { answer, jsonHeaders, post, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { until } from './support/until.js';

/*
 * The response cache (issue 25), on with RESPONSE_CACHE_TTL_MS (the main suite runs without it):
 * answers kept per caller and served with no upstream call, evicted by the gateway's mutations
 * before their answer, ETag/304 and Cache-Control, and what is never kept.
 */

const TTL_MS = 60_000;
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: String(TTL_MS) } });
});
afterAll(() => t.close());
beforeEach(() => t.reset());

/**
 * A fresh token of `username`, issued by the reference upstream's own login (one a login; the gateway's login limits
 * are not what these tests are about).
 */
const login = (username: string) => loginOn(t, username);
async function loginOn(on: TestGateway, username: string): Promise<string> {
  return on.reference.store.login(username, `${username}-password`)!;
}

const headIds = () => t.reference.store.headIds();
const globalHeadId = (uuid: string) => Buffer.from(`Head:${uuid}`).toString('base64');
const headName = 'query Name($id: ID!) { head(id: $id) { name } }';

describe('a repeated query', () => {
  it('is answered from the cache: the same answer, no upstream call, with ETag and Cache-Control', async () => {
    const id = headIds()[0]!;
    const first = await post(t, { query: headName, variables: { id } });
    expect(first.body).toEqual({ data: { head: { name: t.reference.store.findHead(id)!.head.name } } });
    expect(t.calls()).toHaveLength(1);
    expect(first.headers.get('etag')).toMatch(/^W\/"[\w-]{43}"$/);
    expect(first.headers.get('cache-control')).toBe(`public, max-age=${TTL_MS / 1000}`);
    expect(first.headers.get('vary')).toContain('Authorization');
    t.reset();
    const second = await post(t, { query: headName, variables: { id } });
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(t.calls()).toHaveLength(0);
    expect(second.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(second.headers.get('cache-control')).toMatch(/^public, max-age=(59|60)$/);
  });
});

describe('scope: one caller never gets an answer kept for another', () => {
  it('many tokens of several users, each with data of its own: each gets its own answer back, with no upstream call', async () => {
    const id = headIds()[1]!;
    const tokens: string[] = [];
    for (const user of ['demo', 'alice', 'viewer']) for (let i = 0; i < 3; i++) tokens.push(await login(user));
    t.reset();
    // The head changes under the gateway (not through it, so nothing is invalidated) before each
    // caller reads it: each caller's answer is the name it read, and differs from every other's.
    for (const [i, token] of tokens.entries()) {
      t.reference.store.updateHead(id, { name: `tenant ${i}` });
      const { body } = await post(t, { query: headName, variables: { id } }, bearer(token));
      expect(body).toEqual({ data: { head: { name: `tenant ${i}` } } });
    }
    t.reference.store.updateHead(id, { name: 'public' });
    expect((await post(t, { query: headName, variables: { id } })).body).toEqual({
      data: { head: { name: 'public' } },
    });
    expect(t.calls()).toHaveLength(tokens.length + 1);
    t.reset();
    t.reference.store.updateHead(id, { name: 'changed after every read' });
    const again = await Promise.all(
      tokens.map((token) => post(t, { query: headName, variables: { id } }, bearer(token))),
    );
    expect(again.map((a) => (a.body.data as { head: { name: string } }).head.name)).toEqual(
      tokens.map((_, i) => `tenant ${i}`),
    );
    expect((await post(t, { query: headName, variables: { id } })).body).toEqual({
      data: { head: { name: 'public' } },
    });
    expect(t.calls()).toHaveLength(0);
  });

  it("a token the upstream refuses is not served another token's permissions", async () => {
    const query = '{ permissions(first: 3) { nodes { id role } } }';
    const token = await login('alice');
    const kept = await post(t, { query }, bearer(token));
    expect((kept.body.data as { permissions: { nodes: unknown[] } }).permissions.nodes).toHaveLength(3);
    t.reset();
    const stranger = await post(t, { query }, bearer('made-up-token'));
    expect(stranger.body.data ?? null).toBeNull();
    expect(stranger.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(t.calls('getPermissions')).toHaveLength(1);
  });

  it("the scheme's case and the spaces around the token make no other caller", async () => {
    const id = headIds()[2]!;
    const token = await login('demo');
    await post(t, { query: headName, variables: { id } }, { authorization: `Bearer ${token}` });
    t.reset();
    const same = await post(t, { query: headName, variables: { id } }, { authorization: `bearer   ${token} ` });
    expect(same.body.data).toEqual({ head: { name: t.reference.store.findHead(id)!.head.name } });
    expect(t.calls()).toHaveLength(0);
  });

  it("a header RFC 6750 does not read as that token (a tab for the space, another scheme) is another caller: never served the token's answers", async () => {
    const query = '{ permissions(first: 2) { nodes { id role } } }';
    const token = await login('alice');
    const kept = await post(t, { query }, bearer(token));
    expect((kept.body.data as { permissions: { nodes: unknown[] } }).permissions.nodes).toHaveLength(2);
    for (const authorization of [`Bearer\t${token}`, `Token ${token}`, `Bearer ${token}!`]) {
      t.reset();
      const other = await post(t, { query }, { authorization });
      // The upstream reads none of them as the token: refused there, never answered from alice's entry.
      expect(other.body.errors?.[0]?.extensions?.code, authorization).toBe('UNAUTHENTICATED');
      expect(t.calls('getPermissions')).toHaveLength(1);
      expect(t.calls('getPermissions')[0]!.headers.authorization).toBe(authorization);
    }
  });
});

describe('a batch', () => {
  it('has each operation kept on its own, and no max-age for the batch', async () => {
    const ids = headIds();
    const batch = [
      { query: headName, variables: { id: ids[14] } },
      { query: headName, variables: { id: ids[15] } },
    ];
    const first = await post(t, batch);
    expect(t.calls()).toHaveLength(2);
    t.reset();
    const again = await post(t, batch);
    expect(again.body).toEqual(first.body);
    expect(t.calls()).toHaveLength(0);
    expect(again.headers.get('cache-control')).toBeNull();
    expect((await post(t, batch, bearer('a-token'))).headers.get('cache-control')).toBe('private, no-store');
    // A batch of one is a batch too: its response is not the entry's.
    t.reset();
    const one = await post(t, [{ query: headName, variables: { id: ids[14] } }]);
    expect(t.calls()).toHaveLength(0);
    expect(one.headers.get('cache-control')).toBeNull();
    expect(one.headers.get('etag')).toBeNull();
  });
});

describe('HTTP: only JSON answers say they may be kept', () => {
  it('a hit asked for as multipart/mixed or an event stream gets no ETag and no max-age; JSON answers vary on Accept', async () => {
    const url = `http://gateway/graphql?query=${encodeURIComponent('{ heads(first: 5) { totalCount } }')}`;
    const json = await t.gateway.fetch(url);
    await json.text();
    expect(json.headers.get('vary')).toMatch(/Accept(,|$)/);
    t.reset();
    for (const accept of ['multipart/mixed', 'text/event-stream']) {
      const response = await t.gateway.fetch(url, { headers: { accept } });
      await response.text();
      expect(response.status, accept).toBe(200);
      expect(response.headers.get('etag'), accept).toBeNull();
      expect(response.headers.get('cache-control') ?? '', accept).not.toMatch(/max-age/);
    }
    expect(t.calls()).toHaveLength(0);
  });
});

describe('HTTP revalidation', () => {
  it('a GET with a matching If-None-Match is 304, with no body and no upstream call; Cache-Control private with a token', async () => {
    const token = await login('viewer');
    const url = `http://gateway/graphql?query=${encodeURIComponent(headName)}&variables=${encodeURIComponent(JSON.stringify({ id: headIds()[3] }))}`;
    const first = await t.gateway.fetch(url, { headers: bearer(token) });
    await first.text();
    const etag = first.headers.get('etag')!;
    expect(first.headers.get('cache-control')).toBe(`private, max-age=${TTL_MS / 1000}`);
    t.reset();
    const revalidated = await t.gateway.fetch(url, { headers: { ...bearer(token), 'if-none-match': etag } });
    expect(revalidated.status).toBe(304);
    expect(await revalidated.text()).toBe('');
    expect(revalidated.headers.get('etag')).toBe(etag);
    expect(revalidated.headers.get('cache-control')).toMatch(/^private, max-age=(59|60)$/);
    expect(revalidated.headers.get('vary')).toContain('Authorization');
    expect(t.calls()).toHaveLength(0);
  });

  it('takes the entity tag weak or strong, alone, later in a list, or *', async () => {
    const url = `http://gateway/graphql?query=${encodeURIComponent('{ heads(first: 2) { totalCount } }')}`;
    const first = await t.gateway.fetch(url);
    await first.text();
    const etag = first.headers.get('etag')!;
    t.reset();
    for (const header of [etag, etag.slice(2), `"other", ${etag}`, '*']) {
      const revalidated = await t.gateway.fetch(url, { headers: { 'if-none-match': header } });
      expect(revalidated.status, header).toBe(304);
      expect(revalidated.headers.get('etag')).toBe(etag);
    }
    expect(t.calls()).toHaveLength(0);
  });

  it('a tag answers 304 only to a GET whose own answer it names: never to a POST (a mutation is run) or to another answer', async () => {
    const token = await login('viewer');
    const query = '{ heads(first: 3) { totalCount } }';
    const url = `http://gateway/graphql?query=${encodeURIComponent(query)}`;
    const first = await t.gateway.fetch(url, { headers: bearer(token) });
    await first.text();
    const etag = first.headers.get('etag')!;
    const id = headIds()[6]!;
    const renamed = await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { ...bearer(token), 'content-type': 'application/json', 'if-none-match': etag },
      body: JSON.stringify({
        query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }',
        variables: { i: { id, name: 'renamed with a tag' } },
      }),
    });
    expect(renamed.status).toBe(200);
    expect(t.reference.store.findHead(id)!.head.name).toBe('renamed with a tag');
    const other = await t.gateway.fetch(
      `http://gateway/graphql?query=${encodeURIComponent('{ heads(first: 1) { nodes { name } } }')}`,
      { headers: { ...bearer(token), 'if-none-match': etag } },
    );
    expect(other.status).toBe(200);
    const anotherCaller = await t.gateway.fetch(url, {
      headers: { ...bearer(await login('viewer')), 'if-none-match': etag },
    });
    // Another token's own answer may hold the same data (the same tag): what matters is that it was its own.
    expect([200, 304]).toContain(anotherCaller.status);
    expect(anotherCaller.headers.get('cache-control')).toMatch(/^private, max-age=/);
  });

  it('an answer the gateway gives again with other data gets another tag: the old tag is not 304', async () => {
    const id = headIds()[7]!;
    const url = `http://gateway/graphql?query=${encodeURIComponent(headName)}&variables=${encodeURIComponent(JSON.stringify({ id }))}`;
    const first = await t.gateway.fetch(url);
    await first.text();
    const etag = first.headers.get('etag')!;
    const renamed = await post(t, {
      query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }',
      variables: { i: { id, name: 'a new name' } },
    });
    expect(renamed.body.errors).toBeUndefined();
    const again = await t.gateway.fetch(url, { headers: { 'if-none-match': etag } });
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ data: { head: { name: 'a new name' } } });
    expect(again.headers.get('etag')).not.toBe(etag);
  });

  it('a matching tag is 304 only for a JSON answer: asked for as an event stream or multipart/mixed, the answer is sent in full', async () => {
    const url = `http://gateway/graphql?query=${encodeURIComponent('{ heads(first: 4) { totalCount } }')}`;
    const first = await t.gateway.fetch(url);
    await first.text();
    const etag = first.headers.get('etag')!;
    for (const accept of ['text/event-stream', 'multipart/mixed']) {
      const response = await t.gateway.fetch(url, { headers: { accept, 'if-none-match': etag } });
      expect(response.status, accept).toBe(200);
      expect(response.headers.get('content-type'), accept).toContain(accept);
      expect(await response.text(), accept).toContain(`"totalCount":${headIds().length}`);
    }
  });

  it('an If-None-Match that matches nothing kept is answered in full', async () => {
    const response = await t.gateway.fetch(
      `http://gateway/graphql?query=${encodeURIComponent('{ heads(first: 1) { totalCount } }')}`,
      { headers: { 'if-none-match': 'f'.repeat(64) } },
    );
    expect(response.status).toBe(200);
    expect((await answer(response)).body.data).toEqual({ heads: { totalCount: headIds().length } });
  });
});

describe('never kept', () => {
  const expectNotKept = async (body: object, headers: Record<string, string> = {}, operation?: string) => {
    const first = await post(t, body, headers);
    const calls = t.calls(operation).length;
    expect(calls).toBeGreaterThan(0);
    expect(first.headers.get('etag')).toBeNull();
    t.reset();
    const second = await post(t, body, headers);
    expect(t.calls(operation)).toHaveLength(calls);
    return [first, second] as const;
  };

  it('an answer with errors, a partial one too', async () => {
    const ids = headIds();
    t.reference.injectFault('getHeadById', { kind: 'status', status: 500 }, 10);
    const [first] = await expectNotKept(
      {
        query: 'query($a: ID!, $b: ID!) { a: head(id: $a) { name } b: head(id: $b) { name } }',
        variables: { a: ids[4], b: ids[5] },
      },
      {},
      'getHeadById',
    );
    expect(first.body.errors?.length).toBeGreaterThan(0);
    t.reference.clearFaults();
  });

  it('mutations, login among them; a token is never answered from the cache', async () => {
    const token = await login('demo');
    const [, second] = await expectNotKept(
      {
        query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }',
        variables: { i: { id: headIds()[6], name: 'renamed twice' } },
      },
      bearer(token),
      'updateHead',
    );
    expect(second.headers.get('cache-control')).toBe('private, no-store');
    const [a, b] = await expectNotKept(
      {
        query: 'mutation($i: LoginInput!) { login(input: $i) { accessToken } }',
        variables: { i: { username: 'demo', password: 'demo-password' } },
      },
      {},
      'login',
    );
    expect(a.body.data).not.toEqual(b.body.data);
  });

  it('an operation with @defer, whole or in parts', async () => {
    const query = 'query($id: ID!) { head(id: $id) { name ... @defer { url } } }';
    await expectNotKept({ query, variables: { id: headIds()[7] } });
    t.reset();
    const parts = { ...jsonHeaders(), accept: 'multipart/mixed' };
    for (let i = 0; i < 2; i++) {
      const response = await t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: parts,
        body: JSON.stringify({ query, variables: { id: headIds()[7] } }),
      });
      expect(response.headers.get('content-type')).toContain('multipart/mixed');
      await response.text();
    }
    expect(t.calls()).toHaveLength(2);
  });

  it('an operation with @defer spelled as GraphQL also reads it (`@ defer`, `@,defer`): never kept, its parts never merged into a kept answer', async () => {
    for (const [spelling, index] of [
      ['@ defer', 9],
      ['@,defer', 10],
    ] as const) {
      const query = `{ head(id: "${headIds()[index]}") { name ... ${spelling} { url } } }`;
      const v02 = { ...jsonHeaders(), accept: 'multipart/mixed;incrementalSpec=v0.2' };
      for (let i = 0; i < 2; i++) {
        const response = await t.gateway.fetch('http://gateway/graphql', {
          method: 'POST',
          headers: v02,
          body: JSON.stringify({ query }),
        });
        expect(response.headers.get('content-type')).toContain('multipart/mixed');
        await response.text();
      }
      t.reset();
      // The same text as JSON: answered whole, in its own shape (url under head), from the upstream.
      const [json] = await expectNotKept({ query });
      expect(json.body).toEqual({ data: { head: { name: expect.any(String), url: expect.any(String) } } });
      expect(json.headers.get('cache-control')).toBeNull();
    }
  });

  it('introspection', async () => {
    const first = await post(t, { query: '{ __schema { queryType { name } } }' });
    expect(first.body.data).toEqual({ __schema: { queryType: { name: 'Query' } } });
    expect(first.headers.get('etag')).toBeNull();
    expect(first.headers.get('cache-control')).toBeNull();
  });

  it('an answer not kept, to a request with a token, keeps Cache-Control: private, no-store', async () => {
    const response = await post(t, { query: '{ permissions(first: 1) { totalCount } }' }, bearer('not-a-token'));
    expect(response.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(response.headers.get('cache-control')).toBe('private, no-store');
  });
});

describe('a mutation evicts only what it may have changed: by its outcome', () => {
  /** Another token's kept answers that hold the head (and the listings): re-read, how many upstream calls they cost. */
  async function keptReadsOf(uuid: string, token: string) {
    const reads = [
      { query: headName, variables: { id: uuid } },
      { query: '{ heads(first: 100) { nodes { name } } }' },
      { query: `{ nodes(ids: ["${globalHeadId(uuid)}"]) { id } }` },
    ];
    for (const read of reads) await post(t, read, bearer(token));
    return async () => {
      t.reset();
      for (const read of reads) expect((await post(t, read, bearer(token))).body.errors).toBeUndefined();
      return t.calls().length;
    };
  }
  const update = (uuid: string, name: string) => ({
    query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }',
    variables: { i: { id: uuid, name } },
  });

  it("the attack's: an anonymous deleteHead refused UNAUTHENTICATED, an updateHead refused BAD_USER_INPUT, neither sent: another token's answers stay kept", async () => {
    const uuid = headIds()[30]!;
    const reread = await keptReadsOf(uuid, await login('alice'));
    expect(await reread()).toBe(0);
    t.reset();
    const deleted = await post(t, { query: `mutation { deleteHead(input: { id: "${uuid}" }) { deletedHeadUuid } }` });
    expect(deleted.body.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const refused = await post(t, update(uuid, ''), bearer(await login('demo')));
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(t.calls('deleteHead').length + t.calls('updateHead').length).toBe(0);
    expect(await reread()).toBe(0);
  });

  it("a hair's colour changed through one head: another head wearing that hair is read afresh, not served stale", async () => {
    const store = t.reference.store;
    // Two heads wearing one hair: the second made to wear the first's (the seed gives each its own).
    const [wearerA, wearerB] = headIds().filter((id) => store.findHead(id)!.head.hair_id !== undefined) as [
      string,
      string,
    ];
    const writer = await login('demo');
    const hairId = store.findHead(wearerA)!.head.hair_id!;
    const shared = await post(
      t,
      {
        query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { __typename } }',
        variables: { i: { id: wearerB, hairId } },
      },
      bearer(writer),
    );
    expect(shared.body.errors).toBeUndefined();
    const read = {
      query: 'query Hair($id: ID!) { head(id: $id) { hair { objMetadata } } }',
      variables: { id: wearerB },
    };
    const token = await login('alice');
    await post(t, read, bearer(token));
    t.reset();
    const painted = await post(
      t,
      {
        query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { __typename } }',
        variables: { i: { id: wearerA, hairColor: 'teal' } },
      },
      bearer(writer),
    );
    expect(painted.body.errors).toBeUndefined();
    t.reset();
    const again = await post(t, read, bearer(token));
    expect(JSON.stringify(again.body.data)).toContain('teal');
    expect(t.calls().length).toBeGreaterThan(0);
  });

  it('answered 4xx by the upstream (422, 404): nothing evicted', async () => {
    const uuid = headIds()[31]!;
    const reread = await keptReadsOf(uuid, await login('alice'));
    const writer = await login('demo');
    for (const status of [422, 404]) {
      t.reset();
      t.reference.injectFault('updateHead', {
        kind: 'status',
        status,
        body: status === 422 ? { detail: [] } : { detail: 'Not Found' },
      });
      const answered = await post(t, update(uuid, `refused with ${status}`), bearer(writer));
      expect(answered.body.errors?.[0]?.extensions?.upstream).toMatchObject({ operation: 'updateHead', status });
      expect(await reread(), String(status)).toBe(0);
    }
  });

  it('sent and failed 5xx, or its answer lost: may have been applied, so evicted', async () => {
    const writer = await login('demo');
    for (const [i, fault] of [{ kind: 'status', status: 500 }, { kind: 'drop' }].entries()) {
      const uuid = headIds()[32 + i]!;
      const reread = await keptReadsOf(uuid, await login('alice'));
      t.reset();
      t.reference.injectFault('updateHead', fault as never);
      const failed = await post(t, update(uuid, 'maybe applied'), bearer(writer));
      expect(failed.body.errors?.[0]?.extensions?.code, JSON.stringify(fault)).toMatch(/^UPSTREAM_/);
      expect(t.calls('updateHead')).toHaveLength(1);
      expect(await reread(), JSON.stringify(fault)).toBe(3);
    }
  });
});

describe("the gateway's mutations evict what they change, for every caller, before their answer", () => {
  const updateHead = 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }';

  it('updateHead: answers that hold the head (one that never selected its id, a listing), of the writer, another caller and the public scope', async () => {
    const uuid = headIds()[8]!;
    const [writer, other] = [await login('demo'), await login('alice')];
    const reads = [
      { body: { query: headName, variables: { id: uuid } }, headers: bearer(writer) },
      { body: { query: headName, variables: { id: globalHeadId(uuid) } }, headers: bearer(other) },
      { body: { query: headName, variables: { id: uuid } }, headers: {} },
      { body: { query: '{ heads(first: 100) { nodes { name } } }' }, headers: bearer(other) },
    ];
    for (const read of reads) await post(t, read.body, read.headers);
    t.reset();
    for (const read of reads) await post(t, read.body, read.headers);
    expect(t.calls()).toHaveLength(0);
    // The mutation names the head by its UUID, and selects nothing of it.
    const written = await post(
      t,
      {
        query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { __typename } }',
        variables: { i: { id: uuid, name: 'written through the gateway' } },
      },
      bearer(writer),
    );
    expect(written.body.errors).toBeUndefined();
    t.reset();
    const after = await Promise.all(reads.map((read) => post(t, read.body, read.headers)));
    for (const read of after.slice(0, 3))
      expect(read.body.data).toEqual({ head: { name: 'written through the gateway' } });
    expect((after[3]!.body.data as { heads: { nodes: { name: string }[] } }).heads.nodes.map((n) => n.name)).toContain(
      'written through the gateway',
    );
    expect(t.calls()).toHaveLength(reads.length);
  });

  it("updateHead naming the head through a variable's default value evicts it", async () => {
    const uuid = headIds()[12]!;
    const read = { query: headName, variables: { id: uuid } };
    await post(t, read);
    const written = await post(t, {
      query: `mutation Rename($id: ID = "${uuid}") { updateHead(input: { id: $id, name: "named by a default" }) { __typename } }`,
    });
    expect(written.body.errors).toBeUndefined();
    t.reset();
    expect((await post(t, read)).body.data).toEqual({ head: { name: 'named by a default' } });
    expect(t.calls()).toHaveLength(1);
  });

  it('deleteHead (which returns no head): the head and the listings that counted it', async () => {
    const uuid = headIds()[9]!;
    const token = await login('demo');
    const count = { query: '{ heads(first: 1) { totalCount } }' };
    const before = (await post(t, count)).body.data as { heads: { totalCount: number } };
    await post(t, { query: headName, variables: { id: uuid } }, bearer(token));
    t.reset();
    await post(t, count);
    await post(t, { query: headName, variables: { id: uuid } }, bearer(token));
    expect(t.calls()).toHaveLength(0);
    const deleted = await post(
      t,
      {
        query: 'mutation($i: DeleteHeadInput!) { deleteHead(input: $i) { deletedHeadUuid } }',
        variables: { i: { id: globalHeadId(uuid) } },
      },
      bearer(token),
    );
    expect(deleted.body.data).toEqual({ deleteHead: { deletedHeadUuid: uuid } });
    expect((await post(t, count)).body.data).toEqual({ heads: { totalCount: before.heads.totalCount - 1 } });
    expect((await post(t, { query: headName, variables: { id: uuid } }, bearer(token))).body.data).toEqual({
      head: null,
    });
  });

  it('updateSubscription: the subscription it returns is invalidated (no query reads one) and nothing else', async () => {
    const token = await login('demo');
    const id = headIds()[10]!;
    await post(t, { query: headName, variables: { id } }, bearer(token));
    const invalidations = async () =>
      sampleOf(await t.metrics.scrape(), 'gateway_response_cache_invalidations_total') ?? 0;
    const before = await invalidations();
    const updated = await post(
      t,
      {
        query:
          'mutation($i: UpdateSubscriptionInput!) { updateSubscription(input: $i) { subscription { id active subscriptionType { id name } } } }',
        variables: { i: { active: false } },
      },
      bearer(token),
    );
    expect(updated.body.errors).toBeUndefined();
    expect(await invalidations()).toBe(before + 1);
    t.reset();
    await post(t, { query: headName, variables: { id } }, bearer(token));
    expect(t.calls()).toHaveLength(0);
  });

  it('a read that began before a write is not kept after it', async () => {
    const id = headIds()[11]!;
    const token = await login('demo');
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 200 });
    const slow = post(t, { query: headName, variables: { id } }, bearer(token));
    await until(() => t.calls('getHeadById').length === 1, 'the read at the upstream');
    await post(
      t,
      { query: updateHead, variables: { i: { id, name: 'written while a read was under way' } } },
      bearer(token),
    );
    await slow;
    t.reset();
    const next = await post(t, { query: headName, variables: { id } }, bearer(token));
    expect(next.body.data).toEqual({ head: { name: 'written while a read was under way' } });
    expect(t.calls()).toHaveLength(1);
  });
});

describe('with its neighbours', () => {
  const manifest = fileURLToPath(new URL('../src/generated/persisted-documents.json', import.meta.url));
  const headWithHair = Object.entries(JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, string>).find(
    ([, text]) => text.startsWith('query HeadWithHair('),
  )!;

  it('compiled execution (compiling at the first run): hits make no call, and an answer kept from compiled code is evicted by a write', async () => {
    const g = await startTestGateway({
      env: { RESPONSE_CACHE_TTL_MS: String(TTL_MS), COMPILED_EXECUTION_AT_RUN: '1' },
    });
    try {
      const uuid = g.reference.store.headIds()[0]!;
      const compiledRuns = async () => sampleOf(await g.metrics.scrape(), 'gateway_compiled_executions_total');
      const first = await post(g, { query: headName, variables: { id: uuid } });
      expect(first.body).toEqual({ data: { head: { name: g.reference.store.findHead(uuid)!.head.name } } });
      expect(await compiledRuns()).toBe(1);
      g.reset();
      expect((await post(g, { query: headName, variables: { id: uuid } })).body).toEqual(first.body);
      expect(g.calls()).toHaveLength(0);
      expect(await compiledRuns()).toBe(1);
      await post(g, {
        query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { id } } }',
        variables: { i: { id: uuid, name: 'compiled and evicted' } },
      });
      expect((await post(g, { query: headName, variables: { id: uuid } })).body).toEqual({
        data: { head: { name: 'compiled and evicted' } },
      });
      expect(await compiledRuns()).toBe(2);
    } finally {
      await g.close();
    }
  });

  it("a caller's rate limit still holds on a hit", async () => {
    const g = await startTestGateway({
      env: {
        RESPONSE_CACHE_TTL_MS: String(TTL_MS),
        RATE_LIMIT_REQUESTS_PER_SECOND: '1',
        RATE_LIMIT_WINDOW_SECONDS: '2',
      },
    });
    try {
      const read = () =>
        post(g, { query: headName, variables: { id: g.reference.store.headIds()[0] } }, bearer('a-caller'));
      const answers = [await read(), await read(), await read()];
      expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
      expect(answers[2]!.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
      expect(g.calls()).toHaveLength(1);
    } finally {
      await g.close();
    }
  });

  it('trusted documents only: a manifest document is answered from the cache; its text, sent as a query, is still refused', async () => {
    const g = await startTestGateway({
      env: { RESPONSE_CACHE_TTL_MS: String(TTL_MS), TRUSTED_DOCUMENTS_FILE: manifest, TRUSTED_DOCUMENTS_ONLY: 'true' },
    });
    try {
      const [documentId, text] = headWithHair;
      const variables = { id: g.reference.store.headIds()[0] };
      const ran = await post(g, { documentId, variables });
      expect(ran.body.errors).toBeUndefined();
      g.reset();
      expect((await post(g, { documentId, variables })).body).toEqual(ran.body);
      expect(g.calls()).toHaveLength(0);
      const refused = await post(g, { query: text, variables });
      expect(refused.status).toBe(400);
      expect(refused.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_ONLY');
    } finally {
      await g.close();
    }
  });

  it('automatic persisted queries: a hash alone is answered from what its text stored, and two hashes never share an answer', async () => {
    const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
    const ids = headIds();
    const [a, b] = [`query A { head(id: "${ids[12]}") { name } }`, `query A { head(id: "${ids[13]}") { name } }`];
    for (const query of [a, b])
      await post(t, { query, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
    t.reset();
    for (const [query, id] of [
      [a, ids[12]!],
      [b, ids[13]!],
    ] as const) {
      const byHash = await post(t, { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
      expect(byHash.body).toEqual({ data: { head: { name: t.reference.store.findHead(id)!.head.name } } });
    }
    expect(t.calls()).toHaveLength(0);
  });

  it('RESPONSE_CACHE_TTL_PER_TYPE: an answer lives as long as its shortest type allows; 0 keeps it not at all', async () => {
    const g = await startTestGateway({
      env: { RESPONSE_CACHE_TTL_MS: String(TTL_MS), RESPONSE_CACHE_TTL_PER_TYPE: 'Hair=5000,Permission=0' },
    });
    try {
      const id = g.reference.store.headIds()[0];
      const withHair = await post(g, {
        query: 'query($id: ID!) { head(id: $id) { name hair { name } } }',
        variables: { id },
      });
      expect(withHair.headers.get('cache-control')).toBe('public, max-age=5');
      expect((await post(g, { query: headName, variables: { id } })).headers.get('cache-control')).toBe(
        `public, max-age=${TTL_MS / 1000}`,
      );
      const token = (
        await post(g, {
          query: 'mutation { login(input: { username: "demo", password: "demo-password" }) { accessToken } }',
        })
      ).body.data as { login: { accessToken: string } };
      const permissions = { query: '{ permissions(first: 1) { nodes { role } } }' };
      const kept = await post(g, permissions, bearer(token.login.accessToken));
      expect(kept.headers.get('cache-control')).toBe('private, no-store');
      g.reset();
      await post(g, permissions, bearer(token.login.accessToken));
      expect(g.calls('getPermissions')).toHaveLength(1);
      // The connection and its count hold no Permission, and are kept no longer than one (the attack's).
      const counted = { query: '{ permissions(first: 1) { totalCount } }' };
      for (let i = 0; i < 2; i++)
        expect((await post(g, counted, bearer(token.login.accessToken))).headers.get('cache-control')).toBe(
          'private, no-store',
        );
      expect(g.calls('getPermissions')).toHaveLength(3);
    } finally {
      await g.close();
    }
  });
});

describe('RESPONSE_CACHE_STALE_IF_ERROR_MS: a kept answer past its TTL stands in for a read that fails upstream', () => {
  // Kept 1 s, and 1.5 s past it for a read that fails. A gateway each: the faults open its breaker.
  const [ttlMs, staleMs] = [1_000, 1_500];
  let g: TestGateway;
  beforeEach(async () => {
    g = await startTestGateway({
      env: { RESPONSE_CACHE_TTL_MS: String(ttlMs), RESPONSE_CACHE_STALE_IF_ERROR_MS: String(staleMs) },
    });
    url = await g.listen();
    return () => g.close();
  });
  let url: string;

  const headReads = ['getHeadExt', 'getHeadById', 'getHeadExtById'] as const;
  const failHeadReads = (fault: Parameters<TestGateway['reference']['injectFault']>[1]) => {
    for (const operation of headReads) g.reference.injectFault(operation, fault, 100);
  };
  // Over real HTTP: what a client and an HTTP cache between see (Age, Cache-Control).
  const read = async (id: string, token?: string) =>
    answer(
      await fetch(url, {
        method: 'POST',
        headers: { ...jsonHeaders(), ...(token === undefined ? {} : bearer(token)) },
        body: JSON.stringify({ query: headName, variables: { id } }),
      }),
    );
  const expired = () => new Promise((resolve) => setTimeout(resolve, ttlMs + 100));
  const staleCount = async () => sampleOf(await g.metrics.scrape(), 'gateway_response_cache_stale_answers_total') ?? 0;

  it.each([
    ['a 503', { kind: 'status', status: 503 }, 'UPSTREAM_ERROR'],
    ['a dropped connection', { kind: 'drop' }, 'UPSTREAM_UNAVAILABLE'],
  ] as const)(
    '%s: the kept answer, marked stale (extensions.stale, max-age=0, Age), counted',
    async (_name, fault, reason) => {
      const id = headIds()[40]!;
      const kept = await read(id);
      expect(kept.body.errors).toBeUndefined();
      await expired();
      const before = await staleCount();
      failHeadReads(fault);
      const stale = await read(id);
      expect(stale.status).toBe(200);
      expect(stale.body.data).toEqual(kept.body.data);
      expect(stale.body.errors).toBeUndefined();
      expect(stale.body).toEqual({
        data: kept.body.data,
        extensions: { stale: { reason, expiredMs: expect.any(Number) } },
      });
      const { expiredMs } = (stale.body as { extensions: { stale: { expiredMs: number } } }).extensions.stale;
      expect(expiredMs).toBeGreaterThan(0);
      expect(stale.headers.get('cache-control')).toBe('public, max-age=0');
      // Its Age counts from when it was stored (RFC 9111 §4.2.3): its TTL and the time since it expired.
      expect(Number(stale.headers.get('age'))).toBeGreaterThanOrEqual(Math.ceil((ttlMs + expiredMs) / 1000));
      expect(Number(stale.headers.get('age'))).toBeLessThanOrEqual(Math.ceil((ttlMs + expiredMs) / 1000) + 1);
      expect(stale.headers.get('etag')).toBe(kept.headers.get('etag'));
      // It was tried upstream first.
      expect(g.calls().length).toBeGreaterThan(0);
      expect(await staleCount()).toBe(before + 1);
    },
  );

  it("never across callers: another token's failed read gets its error", async () => {
    const id = headIds()[41]!;
    const [alice, demo] = [await loginOn(g, 'alice'), await loginOn(g, 'demo')];
    expect((await read(id, alice)).body.errors).toBeUndefined();
    await expired();
    failHeadReads({ kind: 'status', status: 503 });
    expect((await read(id, demo)).body.errors?.[0]?.extensions?.code).toBe('UPSTREAM_ERROR');
    // The token it was kept for gets it.
    expect((await read(id, alice)).body).toMatchObject({ extensions: { stale: { reason: 'UPSTREAM_ERROR' } } });
  });

  it('never an answer a write evicted, nor one past the window, nor for an answer of the upstream (404)', async () => {
    const [evicted, old, missing] = [headIds()[42]!, headIds()[43]!, headIds()[44]!];
    for (const id of [evicted, old, missing]) expect((await read(id)).body.errors).toBeUndefined();
    const written = await post(g, {
      query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { __typename } }',
      variables: { i: { id: evicted, name: 'evicted, never stale' } },
    });
    expect(written.body.errors).toBeUndefined();
    await expired();
    // The upstream's 404 is its answer, not a fault: its error, not the kept head.
    failHeadReads({ kind: 'status', status: 404 });
    const gone = await read(missing);
    expect(gone.body.data).toEqual({ head: null });
    expect(gone.body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect(gone.body).not.toHaveProperty('extensions');
    g.reset();
    failHeadReads({ kind: 'status', status: 503 });
    expect((await read(evicted)).body.errors?.[0]?.extensions?.code).toBe('UPSTREAM_ERROR');
    expect((await read(old)).body).toMatchObject({ extensions: { stale: { reason: 'UPSTREAM_ERROR' } } });
    // Once the 503s open the breaker, a read refused unsent is answered with it too.
    const reason = async () =>
      ((await read(old)).body as { extensions?: { stale?: { reason?: string } } }).extensions?.stale?.reason;
    await until(async () => (await reason()) === 'UPSTREAM_UNAVAILABLE', 'the breaker open, the kept answer served');
    g.reset();
    expect(await reason()).toBe('UPSTREAM_UNAVAILABLE');
    expect(g.calls()).toHaveLength(0);
    // Past its TTL and the window: gone.
    await new Promise((resolve) => setTimeout(resolve, staleMs));
    expect((await read(old)).body.errors?.[0]?.extensions?.code).toMatch(/^UPSTREAM_(ERROR|UNAVAILABLE)$/);
  });

  it('never a head a read found gone (404): the read evicts its kept answers, so a later failed read gets its error', async () => {
    const id = headIds()[47]!;
    expect((await read(id)).body.errors).toBeUndefined();
    await expired();
    // Deleted elsewhere: the next read is answered 404.
    failHeadReads({ kind: 'status', status: 404 });
    expect((await read(id)).body.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    g.reset();
    failHeadReads({ kind: 'status', status: 503 });
    const after = await read(id);
    expect(after.body.errors?.[0]?.extensions?.code).toBe('UPSTREAM_ERROR');
    expect(after.body).not.toHaveProperty('extensions');
  });

  it("nor for the upstream's 429: it refused the read for its rate, an answer, not a fault", async () => {
    const id = headIds()[46]!;
    expect((await read(id)).body.errors).toBeUndefined();
    await expired();
    failHeadReads({ kind: 'status', status: 429, headers: { 'retry-after': '2' } });
    const limited = await read(id);
    expect(limited.body.data).toEqual({ head: null });
    expect(limited.body.errors?.[0]?.extensions).toMatchObject({
      code: 'UPSTREAM_UNAVAILABLE',
      upstream: { status: 429, reason: 'rate limited' },
      retryAfterMs: 2_000,
    });
    expect(limited.body).not.toHaveProperty('extensions');
  });

  it('off by default: the suite-wide cache answers a failed read past its TTL with its error', async () => {
    const short = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: String(ttlMs) } });
    try {
      const id = headIds()[45]!;
      expect((await post(short, { query: headName, variables: { id } })).body.errors).toBeUndefined();
      await expired();
      for (const operation of headReads) short.reference.injectFault(operation, { kind: 'status', status: 503 }, 100);
      expect((await post(short, { query: headName, variables: { id } })).body.errors?.[0]?.extensions?.code).toBe(
        'UPSTREAM_ERROR',
      );
    } finally {
      await short.close();
    }
  });
});

describe('metrics', () => {
  it('count hits, misses and invalidations, and what the store in memory holds', async () => {
    // Its own misses, hit and eviction (heads no other test reads): the counters are the shared gateway's,
    // counted since it started, whatever the tests before this one did.
    const [evicted, kept] = [headIds()[16]!, headIds()[17]!];
    const series = [
      'gateway_response_cache_lookups_total{result="hit"}',
      'gateway_response_cache_lookups_total{result="miss"}',
      'gateway_response_cache_invalidations_total',
      'gateway_response_cache_evictions_total',
    ];
    const counts = async () => {
      const scraped = await t.metrics.scrape();
      return Object.fromEntries(series.map((name) => [name, sampleOf(scraped, name) ?? 0]));
    };
    const before = await counts();
    await post(t, { query: headName, variables: { id: evicted } });
    await post(t, { query: headName, variables: { id: evicted } });
    await post(t, { query: headName, variables: { id: kept } });
    expect(t.calls()).toHaveLength(2);
    const written = await post(t, {
      query: 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { __typename } }',
      variables: { i: { id: evicted, name: 'evicted for the metrics' } },
    });
    expect(written.body.errors).toBeUndefined();
    const after = await counts();
    for (const name of series) expect(after[name], name).toBeGreaterThan(before[name]!);

    const text = await t.metrics.scrape();
    expect(sampleOf(text, 'gateway_response_cache_lookups_total{result="hit"}')).toBeGreaterThan(0);
    expect(sampleOf(text, 'gateway_response_cache_lookups_total{result="miss"}')).toBeGreaterThan(0);
    expect(sampleOf(text, 'gateway_response_cache_invalidations_total')).toBeGreaterThan(0);
    expect(sampleOf(text, 'gateway_response_cache_evictions_total')).toBeGreaterThan(0);
    expect(sampleOf(text, 'gateway_response_cache_entries')).toBeGreaterThan(0);
    expect(sampleOf(text, 'gateway_response_cache_bytes')).toBeGreaterThan(
      sampleOf(text, 'gateway_response_cache_entries')!,
    );
    // No store call failed: the counter has no series yet.
    expect(text).not.toMatch(/^gateway_response_cache_failures_total\{/m);
  });
});

describe('made-up tokens from one address (RESPONSE_CACHE_MAX_BYTES=8 MiB, a share of 0.1 each for a caller and for an address)', () => {
  let g: TestGateway;
  let url: string;
  const agents: Agent[] = [];
  beforeAll(async () => {
    g = await startTestGateway({
      env: { RESPONSE_CACHE_TTL_MS: '60000', RESPONSE_CACHE_MAX_BYTES: String(8 * 1024 * 1024) },
    });
    url = await g.listen();
  });
  afterAll(async () => {
    await Promise.all(agents.map((agent) => agent.close()));
    await g.close();
  });

  /** Over real HTTP from a loopback address of its own (127.0.0.2 and up: each its own client address). */
  const client = (address: string) => {
    const agent = new Agent({ localAddress: address });
    agents.push(agent);
    return async (query: string, token: string) => {
      const response = await httpFetch(url, {
        method: 'POST',
        dispatcher: agent,
        headers: { ...jsonHeaders(), ...bearer(token) },
        body: JSON.stringify({ query }),
      });
      return (await response.json()) as { data?: unknown; errors?: unknown[] };
    };
  };

  it("cannot push another address's kept answer out, however many tokens they make up", async () => {
    const page =
      '{ heads(first: 100) { nodes { uuid name url arUrl style version lod createdAt updatedAt hair { name } } } }';
    const [victim, attacker] = [client('127.0.0.2'), client('127.0.0.3')];
    expect((await victim(page, 'victim')).errors).toBeUndefined();
    // Sixty tokens' pages, some 230 KB of heap each: well over the whole cache, from one address.
    for (let i = 0; i < 60; i++) expect((await attacker(page, `made-up-${i}`)).errors).toBeUndefined();
    g.reset();
    expect((await victim(page, 'victim')).errors).toBeUndefined();
    // Still kept: answered with no upstream call.
    expect(g.calls()).toEqual([]);
  });
});
