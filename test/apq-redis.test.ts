import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMemoryQueryStore, createRedisQueryStore } from '../src/server/documents/apq-store.js';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import { type Answer, post, startTestGateway, type TestGateway } from './support/gateway.js';
import { connectRedis, type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';

/*
 * APQ registrations with REDIS_URL, against a real redis-server: a registration is stored only
 * once its document parsed and validated with every limit, and Redis holds no more than
 * APQ_MAX_ENTRIES registrations and APQ_MAX_BYTES of text, every gateway's together, each key
 * with a TTL.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const registration = (query: string) => ({
  query,
  extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } },
});
const byHash = (query: string) => ({ extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } } });
const codeOf = (answer: Answer) => answer.body.errors?.[0]?.extensions?.code;

/** A valid query `bytes` long, told apart by `n` (a comment: no token, no depth). */
const paddedQuery = (n: number, bytes = 20) => `{ __typename } # ${n} `.padEnd(bytes, 'x');

let redis: RedisProcess;
let client: Redis;
describeWithRedis('APQ registrations with REDIS_URL', () => {
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  /**
   * Every key of the APQ store in Redis (SCAN, not KEYS); the registrations in its shards' text
   * hashes, each with the bytes Redis holds for it (its text and its expiry); the shards' indexes'
   * sizes and byte totals, added up.
   */
  async function apqKeys(): Promise<{ all: string[]; texts: Map<string, number>; indexed: number; bytes: number }> {
    const all: string[] = [];
    for await (const batch of client.scanStream({ match: 'gw:apq:*', count: 1000 }) as AsyncIterable<string[]>)
      all.push(...batch);
    const texts = new Map<string, number>();
    let indexed = 0;
    let bytes = 0;
    for (const key of all) {
      const [, shard, part] = /^gw:apq:\{(apq-\d+)\}:(texts|index|bytes|owned:.+)$/.exec(key) ?? [];
      expect(shard, key).toBeDefined();
      if (part === 'texts')
        for (const [hash, value] of Object.entries(await client.hgetall(key)))
          texts.set(hash, Buffer.byteLength(value));
      if (part === 'index') indexed += await client.zcard(key);
      if (part === 'bytes') bytes += Number(await client.get(key));
    }
    return { all, texts, indexed, bytes };
  }

  /** What Redis holds for a registration of `query`: its text and its expiry (`<ms>:`). */
  const heldBytes = (query: string) => Buffer.byteLength(query) + `${Date.now()}:`.length;

  /** Junk and refused documents, with the limit that refuses them as plain text, if one does. */
  const refused: [kind: string, query: string, limit?: string][] = [
    ['a syntax error', '{ heads(first: 1) { totalCount }'],
    ['text that is no GraphQL', 'junk '.repeat(2_000)],
    ['a field the schema does not have', '{ heads(first: 1) { nope } }'],
    [
      'more aliases than MAX_ALIASES',
      `{ ${Array.from({ length: 31 }, (_, i) => `a${i}: __typename`).join(' ')} }`,
      'aliases',
    ],
    ['deeper than MAX_DEPTH', `{ __type(name: "Head") { ${'ofType { '.repeat(14)}name${' }'.repeat(15)} }`, 'depth'],
    ['more tokens than MAX_TOKENS', `{ ${'__typename '.repeat(2_100)}}`, 'tokens'],
  ];

  describeWithRedis.each([
    ['with REDIS_URL', true],
    ['in process memory', false],
  ])('a registration that does not validate stores nothing (%s)', (_name, shared) => {
    let t: TestGateway;
    beforeAll(async () => {
      await client.flushall();
      t = await startTestGateway({ env: shared ? { REDIS_URL: redis.url } : {} });
    });
    afterAll(() => t?.close());
    // Each test from an empty Redis and no upstream call, whichever ran before it.
    beforeEach(async () => {
      t.reset();
      await client.flushall();
    });

    it.each(refused)(
      '%s: answered as its text alone is, then PersistedQueryNotFound by hash, and no key in Redis',
      async (_kind, query, limit) => {
        const plain = await post(t, { query });
        expect(plain.status).toBe(400);
        expect(plain.body.errors?.[0]?.extensions?.limit).toBe(limit);
        const registered = await post(t, registration(query));
        expect(registered.status).toBe(plain.status);
        expect(registered.body).toEqual(plain.body);
        expect(codeOf(await post(t, byHash(query)))).toBe('PERSISTED_QUERY_NOT_FOUND');
        expect(t.calls()).toHaveLength(0);
        expect(await client.dbsize()).toBe(0);
      },
    );

    it('a valid registration is stored (in Redis with a TTL of APQ_TTL_SECONDS at most) and runs by hash', async () => {
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
        expect(ttl, key).toBeLessThanOrEqual(10_800_000);
      }
    });
  });

  describeWithRedis('registrations in Redis are bounded across gateways', () => {
    const gateways: TestGateway[] = [];
    // One caller registers everything here: its share is (almost) the whole store, whose own bounds these are.
    const start = (env: Record<string, string>) =>
      startTestGateway({ env: { REDIS_URL: redis.url, APQ_CALLER_SHARE: '0.99', ...env } });
    afterAll(() => Promise.all(gateways.splice(0).map((g) => g.close())));

    /**
     * Registers `queries` in turn at two gateways with the bounds of `env`, then asks a third that has none in memory.
     */
    async function registerThroughTwo(env: Record<string, string>, queries: string[]) {
      await client.flushall();
      const [a, b, fresh] = await Promise.all([start(env), start(env), start(env)]);
      gateways.push(a!, b!, fresh!);
      for (const [i, query] of queries.entries())
        expect((await post(i % 2 === 0 ? a! : b!, registration(query))).body.errors).toBeUndefined();
      const runsByHash = async (query: string) => codeOf(await post(fresh!, byHash(query))) === undefined;
      return { ...(await apqKeys()), runsByHash };
    }

    it('APQ_MAX_ENTRIES=3: 8 registrations leave the 3 newest in Redis; the oldest are gone for a gateway that did not see them', async () => {
      const queries = Array.from({ length: 8 }, (_, i) => paddedQuery(i));
      const { all, texts, indexed, runsByHash } = await registerThroughTwo({ APQ_MAX_ENTRIES: '3' }, queries);
      expect([...texts.keys()].sort()).toEqual(queries.slice(5).map(sha256).sort());
      expect(indexed).toBe(3);
      for (const key of all) expect(await client.pttl(key), key).toBeGreaterThan(0);
      expect(await runsByHash(queries[0]!)).toBe(false);
      expect(await runsByHash(queries[7]!)).toBe(true);
    });

    it('APQ_MAX_BYTES=1024: registrations of 300 bytes leave 3 in Redis, 900 bytes of text, the byte count kept with them', async () => {
      const queries = Array.from({ length: 7 }, (_, i) => paddedQuery(i, 300));
      const { all, texts, bytes, runsByHash } = await registerThroughTwo({ APQ_MAX_BYTES: '1024' }, queries);
      expect([...texts.keys()].sort()).toEqual(queries.slice(4).map(sha256).sort());
      const held = [...texts.values()].reduce((sum, n) => sum + n, 0);
      expect(held).toBe(3 * heldBytes(queries[0]!));
      expect(bytes).toBe(held);
      for (const key of all) expect(await client.pttl(key), key).toBeGreaterThan(0);
      expect(await runsByHash(queries[3]!)).toBe(false);
      expect(await runsByHash(queries[6]!)).toBe(true);
    });

    it('the same registration twice is one entry of its size', async () => {
      const query = paddedQuery(1, 200);
      const { texts, indexed, bytes } = await registerThroughTwo({}, [query, query]);
      expect([...texts]).toEqual([[sha256(query), heldBytes(query)]]);
      expect(indexed).toBe(1);
      expect(bytes).toBe(heldBytes(query));
    });

    it('the defaults spread registrations over 16 shards, each bounded by a sixteenth: 300 registrations leave at most APQ_MAX_ENTRIES', async () => {
      const queries = Array.from({ length: 300 }, (_, i) => paddedQuery(i));
      const { all, texts, indexed, runsByHash } = await registerThroughTwo({ APQ_MAX_ENTRIES: '160' }, queries);
      // 16 shards of 10: each keeps its own 10 newest.
      expect(new Set(all.map((key) => key.split(':')[2])).size).toBe(16);
      expect(texts.size).toBe(160);
      expect(indexed).toBe(160);
      expect(await runsByHash(queries[299]!)).toBe(true);
    });
  });

  describeWithRedis('registrations in Redis made in one millisecond', () => {
    it('leave in the order Redis took them: four at one instant, with room for three, leave the last three', async () => {
      await client.flushall();
      const shared = await connectRedis(redis.url, new GatewayMetrics({ defaultMetrics: false }));
      // The largest hash first: were the four told apart by hash (their expiry one and the same), the last would go.
      const queries = Array.from({ length: 4 }, (_, i) => paddedQuery(i)).sort((x, y) =>
        sha256(y).localeCompare(sha256(x)),
      );
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
      try {
        const store = createRedisQueryStore({
          redis: shared,
          local: createMemoryQueryStore({ maxEntries: 10, maxBytes: 10_000 }),
          ttlSeconds: 600,
          maxEntries: 3,
          maxBytes: 10_000,
        });
        for (const query of queries) await store.set(sha256(query), query);
        const { texts, indexed } = await apqKeys();
        expect(indexed).toBe(3);
        expect([...texts.keys()].sort()).toEqual(queries.slice(1).map(sha256).sort());
      } finally {
        vi.useRealTimers();
        await shared.close();
      }
    });
  });

  describeWithRedis.each([
    ['with REDIS_URL', true],
    ['in process memory', false],
  ])("one address's registrations (APQ_MAX_ENTRIES=160, APQ_CALLER_SHARE=0.25, TRUST_PROXY) %s", (_name, shared) => {
    it("cannot push another address's out, whatever tokens it sends; registering a known hash again takes nothing over", async () => {
      if (shared) await client.flushall();
      const t = await startTestGateway({
        env: { ...(shared ? { REDIS_URL: redis.url } : {}), APQ_MAX_ENTRIES: '160', TRUST_PROXY: 'true' },
      });
      const fresh = shared ? await startTestGateway({ env: { REDIS_URL: redis.url } }) : t;
      try {
        const from = (address: string, token: string) => ({
          'x-forwarded-for': address,
          authorization: `Bearer ${token}`,
        });
        const victim = paddedQuery(-1);
        expect((await post(t, registration(victim), from('203.0.113.1', 'victim'))).body.errors).toBeUndefined();
        const flood = async (from0: number, count: number) => {
          for (let i = from0; i < from0 + count; i++)
            expect(
              (await post(t, registration(paddedQuery(i)), from('198.51.100.7', `made-up-${i}`))).body.errors,
            ).toBeUndefined();
        };
        // Three hundred registrations under made-up tokens from one address.
        await flood(0, 300);
        // Still registered: in Redis for a gateway that never saw it, or in this process's store.
        expect(codeOf(await post(fresh, byHash(victim)))).toBeUndefined();
        // The victim's registered again from the flooding address, then a hundred more: it stays the victim's.
        expect(
          (await post(t, registration(victim), from('198.51.100.7', 'made-up-again'))).body.errors,
        ).toBeUndefined();
        await flood(300, 100);
        expect(codeOf(await post(fresh, byHash(victim)))).toBeUndefined();
        if (shared) expect((await apqKeys()).indexed).toBeLessThanOrEqual(160);
      } finally {
        await t.close();
        if (fresh !== t) await fresh.close();
      }
    });
  });

  describeWithRedis("an owner's registration past its TTL, registered again by that owner at its share", () => {
    it('is registered again, not dropped for its own expired self', async () => {
      await client.flushall();
      const shared = await connectRedis(redis.url, new GatewayMetrics({ defaultMetrics: false }));
      const storeOf = () =>
        createRedisQueryStore({
          redis: shared,
          local: createMemoryQueryStore({ maxEntries: 10, maxBytes: 10_000 }),
          ttlSeconds: 60,
          maxEntries: 4,
          maxBytes: 10_000,
          ownerShare: 0.25,
        });
      const query = paddedQuery(1);
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
      try {
        // One entry a share: the owner's one registration, past its TTL, then sent again.
        await storeOf().set(sha256(query), query, ['address:198.51.100.7']);
        vi.setSystemTime(Date.now() + 61_000);
        await storeOf().set(sha256(query), query, ['address:198.51.100.7']);
        expect(await storeOf().get(sha256(query))).toBe(query);
      } finally {
        vi.useRealTimers();
        await shared.close();
      }
    });
  });

  describe("the in-memory store, one registration over an owner's share", () => {
    it("is not stored, and pushes none of that owner's out (as the Redis script refuses it)", async () => {
      // A share of 250 bytes (a quarter of 1,000): two small registrations fit, one of 400 bytes does not.
      const store = createMemoryQueryStore({ maxEntries: 100, maxBytes: 1_000, ownerShare: 0.25 });
      const owner = ['address:198.51.100.8'];
      const [small, other, large] = [paddedQuery(1, 100), paddedQuery(2, 100), paddedQuery(3, 400)];
      await store.set(sha256(small), small, owner);
      await store.set(sha256(other), other, owner);
      await store.set(sha256(large), large, owner);
      expect(await store.get(sha256(large))).toBeUndefined();
      expect([await store.get(sha256(small)), await store.get(sha256(other))]).toEqual([small, other]);
    });
  });
});
