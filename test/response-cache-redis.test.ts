import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { useResponseCache } from '@graphql-yoga/plugin-response-cache';
import { createSchema, createYoga } from 'graphql-yoga';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import {
  answerJson,
  type GuardedStore,
  ResponseCache,
  type ResponseCacheEvents,
} from '../src/server/response-cache/cache.js';
import { CLOCK_SKEW_MS } from '../src/server/response-cache/redis-answers.js';
import { createRedisResponseCache, type RedisEpoch } from '../src/server/response-cache/redis-store.js';
import type { SharedRedis } from '../src/server/shared-state/shared-redis.js';
import { sampleOf } from './support/metrics.js';
import { connectRedis, type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { until } from './support/until.js';

/*
 * The response cache's Redis store against a real redis-server, with KEYS renamed away: a
 * script or a call that ran KEYS would fail, and so would the test that made it. Two stores on
 * two connections stand for two replicas. (Two gateway processes over it:
 * response-cache-replicas.test.ts.)
 */

type Store = GuardedStore<RedisEpoch>;

const prefix = 'gw:rc:';
const options = {
  maxTtlMs: 60_000,
  maxEntryBytes: 4_096,
  raceWindowMs: 30_000,
  budget: { maxBytes: 64 * 1024 * 1024, callerBytes: 64 * 1024 * 1024 },
};
const answer = (name: string) => ({ data: { head: { id: name, name } } });
const head = (id: string) => ({ typename: 'Head', id });
const ignored: ResponseCacheEvents = { hit() {}, miss() {}, invalidated() {}, stale() {}, failed() {} };

describeWithRedis('the response cache in Redis', () => {
  let redis: RedisProcess;
  let inspector: Redis;
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const connections: SharedRedis[] = [];
  /** Two replicas' stores, each on its own connection. */
  let a: Store;
  let b: Store;

  beforeAll(async () => {
    redis = await startRedis({ args: ['--rename-command', 'KEYS', ''] });
    inspector = new Redis(redis.url);
    for (let i = 0; i < 2; i++) connections.push(await connectRedis(redis.url, metrics));
    [a, b] = connections.map((connection) => createRedisResponseCache({ redis: connection, ...options })) as [
      Store,
      Store,
    ];
  });
  afterAll(async () => {
    await Promise.all(connections.map((connection) => connection.close()));
    inspector?.disconnect();
    await redis?.stop();
  });
  beforeEach(async () => {
    await inspector.flushall();
    // Each test starts with both replicas answering: one that dropped their connections, or let
    // them owe an eviction, may leave them reconnecting or still making evictions again (answering
    // nothing meanwhile) after its own last check.
    for (const store of [a, b])
      await until(
        () =>
          Promise.resolve(store.lookup('x')).then(
            () => true,
            () => false,
          ),
        'each replica answers',
      );
  });

  /** Stores `result` as a miss followed by the answer would: the epoch from the lookup. */
  async function fill(
    store: Store,
    key: string,
    result: object,
    entities: { typename: string; id?: string }[],
    ttlMs = 10_000,
  ) {
    const { answer: found, epoch } = await store.lookup(key);
    expect(found).toBeUndefined();
    return store.write(key, result, entities, ttlMs, epoch!);
  }

  /** The epoch a miss gives now. */
  async function epochOf(store: Store): Promise<RedisEpoch> {
    const { answer: found, epoch } = await store.lookup('never stored');
    expect(found).toBeUndefined();
    return epoch!;
  }

  /** The answer kept under `key`, or undefined. */
  const get = async (store: Store, key: string) => (await store.lookup(key)).answer?.result;

  /** Every key under the prefix (SCAN, in steps) with its PTTL. */
  async function keysWithTtl(): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    for await (const batch of inspector.scanStream({ match: `${prefix}*`, count: 1_000 }) as AsyncIterable<string[]>) {
      for (const key of batch) found.set(key, await inspector.pttl(key));
    }
    return found;
  }

  it('a stored answer comes back with its expiry and its JSON as kept (sent, not serialised again), from either replica', async () => {
    expect(await fill(a, 'q1', answer('one'), [head('1')], 10_000)).toBe(true);
    for (const store of [a, b]) {
      const { answer: hit } = await store.lookup('q1');
      expect(hit?.result).toEqual(answer('one'));
      expect(hit?.json).toBe(answerJson(answer('one')));
      expect(hit!.expiresAt).toBeGreaterThan(Date.now());
      expect(hit!.expiresAt).toBeLessThanOrEqual(Date.now() + 10_000);
    }
    expect(await a.lookup('unknown')).toEqual({ epoch: { since: expect.any(Number), at: expect.any(Number) } });
  });

  it('takes an answer an older build kept (its JSON alone, no expiry) for a miss, and keeps its own over it', async () => {
    await inspector.set(`${prefix}a:legacy`, JSON.stringify(answer('legacy')), 'PX', 10_000);
    expect(await fill(a, 'legacy', answer('new'), [head('1')])).toBe(true);
    expect(await get(b, 'legacy')).toEqual(answer('new'));
  });

  it('keeps no answer longer than maxTtlMs, and none with no TTL', async () => {
    expect(await fill(a, 'forever', answer('forever'), [head('1')], Infinity)).toBe(true);
    expect((await a.lookup('forever')).answer!.expiresAt).toBeLessThanOrEqual(Date.now() + options.maxTtlMs);
    expect(await fill(a, 'zero', answer('zero'), [head('1')], 0)).toBe(false);
    expect(await get(a, 'zero')).toBeUndefined();
  });

  it('an invalidation through one replica evicts every answer holding the entity, for both, and counts them', async () => {
    await fill(a, 'head-1', answer('1'), [head('1')]);
    await fill(a, 'head-1-and-2', answer('1+2'), [head('1'), head('2'), { typename: 'Hair', id: '9' }]);
    await fill(b, 'head-2', answer('2'), [head('2')]);
    await fill(b, 'hair-9', answer('hair'), [{ typename: 'Hair', id: '9' }]);

    expect(await b.invalidate([head('1')])).toBe(2);
    for (const store of [a, b]) {
      expect(await get(store, 'head-1')).toBeUndefined();
      expect(await get(store, 'head-1-and-2')).toBeUndefined();
      expect(await get(store, 'head-2')).toEqual(answer('2'));
      expect(await get(store, 'hair-9')).toEqual(answer('hair'));
    }
  });

  it('a type-wide invalidation evicts every answer holding any entity of the type, and nothing else', async () => {
    await fill(a, 'listing', answer('list'), [{ typename: 'HeadConnection' }, head('1')]);
    await fill(a, 'empty-listing', answer('empty'), [{ typename: 'HeadConnection' }]);
    await fill(b, 'head-1', answer('1'), [head('1')]);
    await fill(b, 'hair-9', answer('hair'), [{ typename: 'Hair', id: '9' }]);

    expect(await a.invalidate([{ typename: 'HeadConnection' }])).toBe(2);
    expect(await get(b, 'listing')).toBeUndefined();
    expect(await get(b, 'empty-listing')).toBeUndefined();
    expect(await get(b, 'head-1')).toEqual(answer('1'));

    expect(await b.invalidate([{ typename: 'Head' }])).toBe(1);
    expect(await get(a, 'head-1')).toBeUndefined();
    expect(await get(a, 'hair-9')).toEqual(answer('hair'));
  });

  it('every key it writes expires', async () => {
    await fill(a, 'short', answer('s'), [head('1'), { typename: 'HeadConnection' }], 1_000);
    await fill(b, 'long', answer('l'), [head('1'), head('2')], 20_000);
    await fill(a, 'plain', answer('p'), [{ typename: 'Hair', id: '9' }], Infinity);
    await b.invalidate([head('2'), { typename: 'Hair' }]);

    const keys = await keysWithTtl();
    // Answers, per-entity and per-type indexes and the invalidation versions, each entity's two in
    // one hash slot; the budget's buckets (these keys name no caller), all in one slot too.
    const [budget, rest] = [
      [...keys.keys()].filter((key) => key.startsWith('gw:rc:{budget}:')),
      [...keys.keys()].filter((key) => !key.startsWith('gw:rc:{budget}:')),
    ];
    expect(rest.sort()).toEqual(
      [
        'gw:rc:a:short',
        'gw:rc:{Head}:i',
        'gw:rc:{Head:1}:i',
        'gw:rc:{HeadConnection}:i',
        'gw:rc:{Hair:9}:i',
        'gw:rc:{Hair}:v',
        'gw:rc:{Head:2}:v',
      ].sort(),
    );
    expect(new Set(budget.map((key) => key.replace(/:\d+$/, '')))).toEqual(
      new Set(['gw:rc:{budget}:all', 'gw:rc:{budget}:caller:']),
    );
    for (const [key, ttl] of keys) expect({ key, expires: ttl > 0 }).toEqual({ key, expires: true });
    // An index lives as long as the longest answer it holds.
    expect(keys.get('gw:rc:{Head:1}:i')).toBeGreaterThan(1_000);
  });

  it('keeps in an index only the answers still kept: those that expired leave it as others come, whose traffic keeps the index alive', async () => {
    // Brief, but long enough for all 50 to be written before the first expires, on a busy machine too.
    for (let i = 0; i < 50; i++)
      await fill(a, `brief-${i}`, answer(`brief-${i}`), [head(`brief-${i}`), { typename: 'HeadConnection' }], 1_000);
    expect(await inspector.zcard(`${prefix}{HeadConnection}:i`)).toBe(50);
    await until(async () => (await inspector.exists(`${prefix}a:brief-49`)) === 0, 'the brief answers expired');
    await fill(a, 'later', answer('later'), [head('later'), { typename: 'HeadConnection' }]);
    expect(await inspector.zrange(`${prefix}{HeadConnection}:i`, 0, -1)).toEqual(['later']);
  });

  it('refuses to store an answer whose entity was invalidated after its lookup, and only such answers', async () => {
    const slow = await a.lookup('slow-head-1');
    const other = await a.lookup('slow-head-3');
    const listing = await a.lookup('slow-listing');
    expect(await b.invalidate([head('1'), { typename: 'HeadConnection' }])).toBe(0);

    expect(await a.write('slow-head-1', answer('stale'), [head('1'), head('3')], 10_000, slow.epoch!)).toBe(false);
    expect(
      await a.write(
        'slow-listing',
        answer('stale list'),
        [{ typename: 'HeadConnection' }, head('5')],
        10_000,
        listing.epoch!,
      ),
    ).toBe(false);
    expect(await get(b, 'slow-head-1')).toBeUndefined();
    expect(await get(b, 'slow-listing')).toBeUndefined();
    // The invalidation does not concern head 3: its answer is stored.
    expect(await a.write('slow-head-3', answer('3'), [head('3')], 10_000, other.epoch!)).toBe(true);
    // Invalidations are dated by each replica's clock: a lookup less than the clocks' allowed skew
    // after one loses its turn (it might have begun before it on another replica's clock) ...
    expect(await fill(a, 'slow-head-1', answer('fresh'), [head('1')])).toBe(false);
    // ... and one after it stores (a timer may fire a millisecond early on the clocks compared).
    await sleep(CLOCK_SKEW_MS + 20);
    expect(await fill(a, 'slow-head-1', answer('fresh'), [head('1')])).toBe(true);
    expect(await get(b, 'slow-head-1')).toEqual(answer('fresh'));
  });

  it('refuses an epoch older than raceWindowMs, and an epoch from before Redis lost its data', async () => {
    const epoch = await epochOf(a);
    expect(
      await a.write('old', answer('old'), [head('1')], 10_000, {
        ...epoch,
        at: performance.now() - options.raceWindowMs - 1,
      }),
    ).toBe(false);

    // Redis empties (a restart, a failover to a replica that had not caught up): an invalidation after it is dated
    // after the epoch all the same.
    const before = await epochOf(a);
    await inspector.flushall();
    await b.invalidate([head('1')]);
    expect(await a.write('before-restart', answer('stale'), [head('1')], 10_000, before)).toBe(false);
    expect(await get(a, 'before-restart')).toBeUndefined();
    expect(await a.write('other', answer('other'), [head('2')], 10_000, before)).toBe(true);
  });

  it('does not store an answer longer than maxEntryBytes', async () => {
    const big = { data: { text: 'x'.repeat(options.maxEntryBytes) } };
    expect(await fill(a, 'big', big, [head('1')])).toBe(false);
    expect(await get(b, 'big')).toBeUndefined();
    expect(await keysWithTtl()).toEqual(new Map());
    const fits = { data: { text: 'x'.repeat(options.maxEntryBytes - 100) } };
    expect(await fill(a, 'fits', fits, [head('1')])).toBe(true);
  });

  it('keeps an answer keepExpiredMs past its TTL for `stale` only, in its indexes too: a write evicts it', async () => {
    const [x, y] = connections.map((redis) =>
      createRedisResponseCache({ redis, ...options, keepExpiredMs: 60_000 }),
    ) as [Store, Store];
    expect(await fill(x, 'kept', answer('kept'), [head('1')], 200)).toBe(true);
    expect(await fill(x, 'evicted', answer('evicted'), [head('2')], 200)).toBe(true);
    await sleep(300);
    // Past its TTL: a miss to a lookup, from either replica; there for `stale`, with when it expired.
    expect((await y.lookup('kept')).answer).toBeUndefined();
    expect(await y.stale('kept')).toEqual({
      result: answer('kept'),
      json: answerJson(answer('kept')),
      expiresAt: expect.any(Number),
      storedAt: expect.any(Number),
    });
    expect((await y.stale('kept'))!.expiresAt).toBeLessThan(Date.now());
    expect(await inspector.pttl(`${prefix}a:kept`)).toBeGreaterThan(50_000);
    await y.invalidate([head('2')]);
    expect(await x.stale('evicted')).toBeUndefined();
    expect(await x.stale('never')).toBeUndefined();
    // Without keepExpiredMs it is gone with its TTL.
    expect(await fill(a, 'brief', answer('brief'), [head('3')], 200)).toBe(true);
    await sleep(300);
    expect(await a.stale('brief')).toBeUndefined();
  });

  describe('its byte budget (RESPONSE_CACHE_MAX_BYTES, RESPONSE_CACHE_CALLER_SHARE), kept in Redis for every replica', () => {
    /** What Redis holds in keys (`MEMORY USAGE` of each: key, value and its entry), not its buffers or caches. */
    async function heldBytes(): Promise<number> {
      let held = 0;
      for await (const batch of inspector.scanStream({ count: 1_000 }) as AsyncIterable<string[]>) {
        for (const key of batch) held += Number(await inspector.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
      }
      return held;
    }
    /** Two replicas' stores with this budget, and the bounds they report. */
    function budgeted(maxBytes: number, callerBytes: number) {
      const met: string[] = [];
      const [x, y] = connections.map((redis) =>
        createRedisResponseCache({
          redis,
          ...options,
          budget: { maxBytes, callerBytes },
          overBudget: (bound) => met.push(bound),
        }),
      ) as [Store, Store];
      return { x, y, met };
    }
    /** A 3 kB answer about heads of its own, kept for `caller` (a key `<scope>:<hash>`, as responseCacheKey makes). */
    const write = (store: Store, caller: string, i: number) =>
      fill(store, `${caller}:${i}`, { data: { text: 'x'.repeat(3_000) } }, [
        head(`${caller}-${i}-a`),
        head(`${caller}-${i}-b`),
      ]);

    it('stores no answer past the budget, whichever replica writes it, and Redis holds no more than the budget', async () => {
      const before = await heldBytes();
      const { x, y, met } = budgeted(200_000, 200_000);
      const stored: boolean[] = [];
      for (let i = 0; i < 100; i++) stored.push(await write(i % 2 === 0 ? x : y, 'c0ffee', i));
      const kept = stored.filter(Boolean).length;
      // The first answers go in, the rest (some 300 kB more) not: the two replicas charge one budget.
      expect(stored.slice(0, 10)).toEqual(Array(10).fill(true));
      expect(kept).toBeGreaterThan(20);
      expect(kept).toBeLessThan(60);
      expect(met).toEqual(Array(100 - kept).fill('total'));
      expect(
        (await Promise.all(Array.from({ length: 100 }, (_, i) => get(x, `c0ffee:${i}`)))).filter(Boolean),
      ).toHaveLength(kept);
      // What it weighs is an upper bound of what Redis holds for it (each index counted as one of
      // its own: the type-wide one is shared here). Counted in keys: Redis's used_memory also
      // moves with its clients' buffers, by tens of kB either way on a busy machine.
      const held = (await heldBytes()) - before;
      expect(held).toBeGreaterThan(kept * 3_000);
      expect(held).toBeLessThanOrEqual(200_000);
    });

    it("stores no answer past a caller's share, while other callers' still go in", async () => {
      const { x, y, met } = budgeted(1_000_000, 100_000);
      const greedy: boolean[] = [];
      for (let i = 0; i < 30; i++) greedy.push(await write(i % 2 === 0 ? x : y, 'aaaa', i));
      expect(greedy.filter(Boolean).length).toBeGreaterThan(5);
      expect(greedy.filter(Boolean).length).toBeLessThan(30);
      expect(met.every((bound) => bound === 'caller')).toBe(true);
      for (let i = 0; i < 5; i++) expect(await write(y, 'bbbb', i)).toBe(true);
      expect(await write(x, 'public', 0)).toBe(true);
    });

    it('takes answers again once what it charged is older than the longest TTL', async () => {
      const short = { ...options, maxTtlMs: 1_000 };
      const [x] = connections.map((redis) =>
        createRedisResponseCache({ redis, ...short, budget: { maxBytes: 30_000, callerBytes: 30_000 } }),
      ) as [Store];
      const large = (i: number) => fill(x, `c:${i}`, { data: { text: 'x'.repeat(3_000) } }, [head(`${i}`)], 1_000);
      let i = 0;
      while (await large(i)) i++;
      expect(i).toBeGreaterThan(1);
      expect(await large(i + 1)).toBe(false);
      // The budget's buckets span the TTL and the clock skew: the same answers go in again within a few seconds.
      const full = Date.now();
      await until(() => large(i + 2), 'an answer stored again', 10_000, 100);
      expect(Date.now() - full).toBeGreaterThanOrEqual(1_000);
    });
  });

  it('evicts a popular entity held by 5,000 answers, in bounded steps and with no KEYS', async () => {
    const keys = Array.from({ length: 5_000 }, (_, i) => `popular-${i}`);
    const epoch = await epochOf(a);
    // In rounds of 250: 5,000 at once could queue longer than a command may take (500 ms) on a busy machine.
    for (let from = 0; from < keys.length; from += 250) {
      const round = keys
        .slice(from, from + 250)
        .map((key, i) =>
          (i % 2 ? a : b).write(key, answer(key), [head('popular'), head(`own-${from + i}`)], 30_000, epoch),
        );
      expect(await Promise.all(round)).toEqual(Array(round.length).fill(true));
    }
    await fill(a, 'unrelated', answer('u'), [head('other')]);

    await inspector.config('RESETSTAT');
    expect(await a.invalidate([head('popular')])).toBe(5_000);
    // One script per 500 evictions at most: Redis is never held for the whole of them.
    const scripts = [
      ...(await inspector.info('commandstats')).matchAll(/^cmdstat_(?:eval|evalsha):calls=(\d+)/gm),
    ].reduce((sum, [, calls]) => sum + Number(calls), 0);
    expect(scripts).toBeGreaterThanOrEqual(10);
    const left = await keysWithTtl();
    expect([...left.keys()].filter((key) => key.startsWith('gw:rc:a:'))).toEqual(['gw:rc:a:unrelated']);
    expect(left.has('gw:rc:{Head:popular}:i')).toBe(false);
    // The type-wide index holds them all too: evicting by type goes the same way.
    expect(await b.invalidate([{ typename: 'Head' }])).toBe(1);
    expect(await get(a, 'unrelated')).toBeUndefined();
  });

  it("is the store of yoga's useResponseCache through ResponseCache: a hit on one replica for what the other cached, evicted by the other's mutation", async () => {
    const reads: string[] = [];
    const schema = createSchema({
      typeDefs:
        'type Head { id: ID! name: String! } type Query { head(id: ID!): Head! } type Mutation { renameHead(id: ID!): Head! }',
      resolvers: {
        Query: {
          head: (_: unknown, { id }: { id: string }) => {
            reads.push(id);
            return { id, name: `head ${id}` };
          },
        },
        Mutation: { renameHead: (_: unknown, { id }: { id: string }) => ({ id, name: 'renamed' }) },
      },
    });
    // Stores of their own, under a prefix no other test reads: the plugin stores without waiting, and
    // a write of this test landing after the next one emptied Redis is left out of that test's keys.
    const own = 'yoga:rc:';
    const stores = connections.map((connection) =>
      createRedisResponseCache({ redis: connection, ...options, prefix: own }),
    );
    const replicas = stores.map((store) =>
      createYoga({
        schema,
        plugins: [
          useResponseCache({ cache: new ResponseCache(store, ignored, 30_000), session: () => null, ttl: 10_000 }),
        ],
      }),
    );
    const run = async (replica: number, query: string) =>
      (await (
        await replicas[replica]!.fetch('http://yoga/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query }),
        })
      ).json()) as { data?: unknown };
    const read = '{ head(id: "7") { id name } }';

    expect((await run(0, read)).data).toEqual({ head: { id: '7', name: 'head 7' } });
    // The plugin stores without waiting: the answer is there once its write has landed.
    await until(async () => (await inspector.exists(`${own}{Head:7}:i`)) === 1, 'the answer stored');
    expect((await run(1, read)).data).toEqual({ head: { id: '7', name: 'head 7' } });
    expect(reads).toEqual(['7']);

    await run(1, 'mutation { renameHead(id: "7") { id name } }');
    await until(async () => (await inspector.exists(`${own}{Head:7}:i`)) === 0, 'the answer evicted');
    await run(0, read);
    expect(reads).toEqual(['7', '7']);
  });

  describe('when Redis stops', () => {
    const fallbacks = async () =>
      sampleOf(
        await metrics.registry.metrics(),
        'gateway_shared_state_fallbacks_total{store="response_cache",reason="unreachable"}',
      ) ?? 0;

    it('rejects every call (the cache takes it as a miss), counts each fallback, and works again once Redis is back', async () => {
      await fill(a, 'kept', answer('kept'), [head('1')]);
      const epoch = await epochOf(a);
      const before = await fallbacks();
      await redis.stop();

      await expect(a.lookup('kept')).rejects.toThrow();
      await expect(a.write('new', answer('new'), [head('1')], 10_000, epoch)).rejects.toThrow();
      // An invalidation that could not reach Redis says so.
      await expect(b.invalidate([head('1')])).rejects.toThrow();
      expect(await fallbacks()).toBe(before + 3);

      await redis.start();
      expect(await Promise.all(connections.map((connection) => connection.whenReady(10_000)))).toEqual([true, true]);
      // b makes its lost eviction, and each its recent ones, again as it reconnects, answering nothing meanwhile: then
      // both work as before.
      for (const store of [a, b])
        await until(
          () =>
            Promise.resolve(store.lookup('x')).then(
              () => true,
              () => false,
            ),
          'each has made its evictions again',
        );
      // (Of a type no test invalidates: b has just made its recent evictions again, dated now.)
      const fresh = { typename: 'Permission', id: '1' };
      expect(await fill(a, 'again', answer('again'), [fresh])).toBe(true);
      expect(await get(b, 'again')).toEqual(answer('again'));
      expect(await b.invalidate([fresh])).toBe(1);
      expect(await get(a, 'again')).toBeUndefined();
    });
  });

  describe('evictions Redis did not take, or lost', () => {
    const allFallbacks = async () =>
      (await metrics.registry.getSingleMetric('gateway_shared_state_fallbacks_total')!.get()).values.reduce(
        (sum, { value }) => sum + value,
        0,
      );

    it('an eviction whose answers were taken off their index but not deleted owes them by key, and deletes them once it can', async () => {
      // A type of its own: a store still making its recent evictions again after a test that cut
      // its connection (a type-wide one of Head among them) would evict a Head's answer under it.
      const owed = { typename: 'Owed', id: 'taken' };
      await until(() => fill(a, 'taken', answer('taken'), [owed]), 'the answer kept');
      // Redis takes the invalidation script and refuses the deletion that follows it.
      await inspector.call('ACL', 'SETUSER', 'default', '-unlink');
      try {
        await expect(b.invalidate([owed])).rejects.toThrow();
        // The index no longer names the answer: only its key can evict it now.
        expect(await inspector.zcard(`${prefix}{Owed:taken}:i`)).toBe(0);
        expect(await get(a, 'taken')).toEqual(answer('taken'));
        // Meanwhile b answers nothing from Redis, which is no fallback: Redis answers.
        const fallbacks = await allFallbacks();
        for (let i = 0; i < 3; i++)
          await expect(Promise.resolve(b.lookup('taken'))).rejects.toThrow('Evictions are owed');
        expect(await allFallbacks()).toBe(fallbacks);
      } finally {
        await inspector.call('ACL', 'SETUSER', 'default', '+unlink');
      }
      await until(async () => (await inspector.exists(`${prefix}a:taken`)) === 0, 'the owed answer deleted');
      expect(await get(a, 'taken')).toBeUndefined();
    });

    it('a replica that stops while it owes an eviction makes it as it closes its connection', async () => {
      const stopping = await connectRedis(redis.url, metrics);
      const d = createRedisResponseCache({ redis: stopping, ...options });
      await fill(a, 'last', answer('last'), [head('last')]);
      await inspector.call('ACL', 'SETUSER', 'default', '-unlink');
      try {
        await expect(d.invalidate([head('last')])).rejects.toThrow();
      } finally {
        await inspector.call('ACL', 'SETUSER', 'default', '+unlink');
      }
      // At once (its retry is a second away): the stop itself makes it.
      await stopping.close();
      expect(await inspector.exists(`${prefix}a:last`)).toBe(0);
    });

    it('after a loss of its connection (a failover to a replica that had not seen it) a replica makes its recent evictions again', async () => {
      await fill(a, 'evicted', answer('evicted'), [head('recent')]);
      expect(await b.invalidate([head('recent')])).toBe(1);
      // What a replica promoted between the eviction's two steps would hold: the answer, which its
      // index no longer names (the script that took it off was replicated, its deletion was not).
      await inspector.set(
        `${prefix}a:evicted`,
        `${Date.now() + 30_000}:${JSON.stringify(answer('evicted'))}`,
        'PX',
        30_000,
      );
      expect(await get(a, 'evicted')).toEqual(answer('evicted'));
      // Every connection but this one dropped: each replica reconnects, and b makes its recent evictions again.
      await inspector.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await until(async () => (await inspector.exists(`${prefix}a:evicted`)) === 0, 'the recent eviction made again');
    });
  });

  describe('when one replica loses Redis while Redis keeps its data (a network cut)', () => {
    let proxy: TcpProxy;
    let cutOff: SharedRedis;
    /** A replica whose connection to Redis goes through `proxy`. */
    let c: Store;

    beforeAll(async () => {
      proxy = await startTcpProxy({ host: '127.0.0.1', port: redis.port });
      cutOff = await connectRedis(`redis://127.0.0.1:${proxy.port}`, metrics);
      c = createRedisResponseCache({ redis: cutOff, ...options });
    });
    afterAll(async () => {
      await cutOff?.close();
      await proxy?.close();
    });

    it('makes the eviction it could not make once it reaches Redis again, and serves nothing from Redis until it has', async () => {
      await fill(a, 'held', answer('held'), [head('1')]);
      await fill(a, 'other', answer('other'), [head('2')]);
      proxy.cut();
      // A write through c: its eviction cannot reach Redis. The other replicas still serve what
      // it should have evicted: for as long as the cut lasts, not for the TTL.
      await expect(c.invalidate([head('1')])).rejects.toThrow();
      expect(await get(a, 'held')).toEqual(answer('held'));

      proxy.heal();
      await until(async () => (await get(a, 'held')) === undefined, 'the owed eviction made');
      // Only the answers holding head 1 went; c answers again once its eviction is made.
      expect(await get(a, 'other')).toEqual(answer('other'));
      await until(
        () =>
          Promise.resolve(c.lookup('other')).then(
            ({ answer: hit }) => hit !== undefined,
            () => false,
          ),
        'c answers again',
      );
    });
  });
});
