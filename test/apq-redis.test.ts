import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestGateway, type Answer, type TestGateway } from './support/gateway.js';
import { startRedis, type RedisProcess } from './support/redis.js';

/*
 * APQ registrations with REDIS_URL, against a real redis-server: a registration is stored only
 * once its document parsed and validated with every limit.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const registration = (query: string) => ({ query, extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
const byHash = (query: string) => ({ extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
const codeOf = (answer: Answer) => answer.body.errors?.[0]?.extensions?.['code'];

let redis: RedisProcess;
let client: Redis;
beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});
afterAll(async () => {
  client?.disconnect();
  await redis?.stop();
});

/** Every key of the APQ store in Redis (SCAN, not KEYS), and the texts among them. */
async function apqKeys(): Promise<{ all: string[]; texts: Map<string, number> }> {
  const all: string[] = [];
  for await (const batch of client.scanStream({ match: 'gw:apq:*', count: 1000 }) as AsyncIterable<string[]>) all.push(...batch);
  const texts = new Map<string, number>();
  for (const key of all.filter((k) => /^gw:apq:[0-9a-f]{64}$/.test(k))) texts.set(key.slice('gw:apq:'.length), await client.strlen(key));
  return { all, texts };
}

/** Junk and refused documents, with the limit that refuses them as plain text, if one does. */
const refused: [kind: string, query: string, limit?: string][] = [
  ['a syntax error', '{ heads(first: 1) { totalCount }'],
  ['text that is no GraphQL', 'junk '.repeat(2_000)],
  ['a field the schema does not have', '{ heads(first: 1) { nope } }'],
  ['more aliases than MAX_ALIASES', `{ ${Array.from({ length: 31 }, (_, i) => `a${i}: __typename`).join(' ')} }`, 'aliases'],
  ['deeper than MAX_DEPTH', `{ __type(name: "Head") { ${'ofType { '.repeat(14)}name${' }'.repeat(15)} }`, 'depth'],
  ['more tokens than MAX_TOKENS', `{ ${'__typename '.repeat(2_100)}}`, 'tokens'],
];

describe.each([
  ['with REDIS_URL', true],
  ['in process memory', false],
])('a registration that does not validate stores nothing (%s)', (_name, shared) => {
  let t: TestGateway;
  beforeAll(async () => {
    await client.flushall();
    t = await startTestGateway({ env: shared ? { REDIS_URL: redis.url } : {} });
  });
  afterAll(() => t?.close());

  it.each(refused)('%s: answered as its text alone is, then PersistedQueryNotFound by hash, and no key in Redis', async (_kind, query, limit) => {
    const plain = await post(t, { query });
    expect(plain.status).toBe(400);
    expect(plain.body.errors?.[0]?.extensions?.['limit']).toBe(limit);
    const registered = await post(t, registration(query));
    expect(registered.status).toBe(plain.status);
    expect(registered.body).toEqual(plain.body);
    expect(codeOf(await post(t, byHash(query)))).toBe('PERSISTED_QUERY_NOT_FOUND');
    expect(t.calls()).toHaveLength(0);
    expect(await client.dbsize()).toBe(0);
  });

  it('a valid registration is stored (in Redis with a TTL) and runs by hash', async () => {
    const query = '{ heads(first: 1) { totalCount } }';
    expect((await post(t, registration(query))).body.data).toEqual({ heads: { totalCount: expect.any(Number) } });
    const hashOnly = await post(t, byHash(query));
    expect(hashOnly.body.errors).toBeUndefined();
    expect(hashOnly.body.data).toEqual({ heads: { totalCount: expect.any(Number) } });
    const { all, texts } = await apqKeys();
    expect([...texts.keys()]).toEqual(shared ? [sha256(query)] : []);
    for (const key of all) {
      const ttl = await client.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
    }
  });
});
