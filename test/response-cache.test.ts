import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { answer, jsonHeaders, post, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';

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

/** A fresh token of `username` (the reference upstream issues one per login). */
async function login(username: string): Promise<string> {
  const { body } = await post(t, { query: 'mutation($i: LoginInput!) { login(input: $i) { accessToken } }', variables: { i: { username, password: `${username}-password` } } });
  return (body.data as { login: { accessToken: string } }).login.accessToken;
}

const headIds = () => t.reference.store.headIds();
const globalHeadId = (uuid: string) => Buffer.from(`Head:${uuid}`).toString('base64');
const headName = 'query Name($id: ID!) { head(id: $id) { name } }';

describe('a repeated query', () => {
  it('is answered from the cache: the same answer, no upstream call, with ETag, Last-Modified and Cache-Control', async () => {
    const id = headIds()[0]!;
    const first = await post(t, { query: headName, variables: { id } });
    expect(first.body).toEqual({ data: { head: { name: t.reference.store.findHead(id)!.head.name } } });
    expect(t.calls()).toHaveLength(1);
    expect(first.headers.get('etag')).toMatch(/^[0-9a-f]{64}$/);
    expect(first.headers.get('cache-control')).toBe(`public, max-age=${TTL_MS / 1000}`);
    expect(first.headers.get('vary')).toContain('Authorization');
    t.reset();
    const second = await post(t, { query: headName, variables: { id } });
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    expect(t.calls()).toHaveLength(0);
    expect(second.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(second.headers.get('last-modified')).toBe(first.headers.get('last-modified'));
    expect(second.headers.get('cache-control')).toMatch(/^public, max-age=(59|60)$/);
  });
});
