import { describe, expect, it, vi } from 'vitest';
import {
  expiresAtKey,
  type GuardedStore,
  ResponseCache,
  type ResponseCacheEvents,
} from '../src/server/response-cache/cache.js';
import { createMemoryResponseCache } from '../src/server/response-cache/memory-store.js';

/*
 * The response cache's store in process memory and the cache the plugin is handed over any store
 * (server/response-cache/cache.ts): bounds, the index, the race guard, failing open.
 */

const answer = (name: string) => ({ data: { head: { name } } });
const head = (id: string) => ({ typename: 'Head', id });
/** RESPONSE_CACHE_MAX_ENTRY_BYTES, larger than any answer here unless a test says. */
const MAX_ENTRY = 1_000_000;

function counting(): ResponseCacheEvents & { counts: Record<string, number>; failures: string[] } {
  const counts = { hit: 0, miss: 0, invalidated: 0, evicted: 0, failed: 0, stale: 0 };
  const failures: string[] = [];
  return {
    counts,
    failures,
    hit: () => counts.hit++,
    miss: () => counts.miss++,
    stale: () => counts.stale++,
    invalidated: (_entities, evicted) => {
      counts.invalidated++;
      counts.evicted += evicted ?? 0;
    },
    failed: (call) => {
      counts.failed++;
      failures.push(call);
    },
  };
}

describe('the store in process memory', () => {
  it('is bounded by count and by the heap its answers hold, and keeps no answer weighing over an eighth of it nor over RESPONSE_CACHE_MAX_ENTRY_BYTES of JSON', () => {
    const byCount = createMemoryResponseCache(
      { maxEntries: 2, maxBytes: 1_000_000, callerBytes: 1_000_000 },
      MAX_ENTRY,
    );
    for (const key of ['a', 'b', 'c']) byCount.write(key, answer(key), [], 60_000, 0);
    expect(byCount.use()).toEqual({ entries: 2, bytes: expect.any(Number) });
    expect(byCount.lookup('a')).toEqual({ epoch: 0 });

    const size = Buffer.byteLength(JSON.stringify(answer('x'.repeat(10))));
    // An answer weighs the heap it holds, estimated: 2.4 bytes a byte of JSON, 350 an index key, 256 the entry.
    const weight = Math.ceil(2.4 * size + 256);
    const byBytes = createMemoryResponseCache(
      { maxEntries: 1_000, maxBytes: 8 * weight, callerBytes: 8 * weight },
      MAX_ENTRY,
    );
    for (let i = 0; i < 20; i++) byBytes.write(`k${i}`, answer(String(i).padStart(10, '0')), [], 60_000, 0);
    expect(byBytes.use()).toEqual({ entries: 8, bytes: 8 * weight });
    expect(byBytes.write('large', answer('y'.repeat(11)), [], 60_000, 0)).toBe(false);
    expect(byBytes.lookup('large')).toEqual({ epoch: 0 });
    // The objects an answer holds weigh too (the attack: 64 MiB of JSON held 320 MB of heap): 20 heads, 21 index keys
    // (`Head` and each `Head:id`), 7,350 bytes more.
    const heads = Array.from({ length: 20 }, (_, i) => head(`h${i}`));
    const indexed = createMemoryResponseCache(
      { maxEntries: 1_000, maxBytes: 8 * (weight + 7_350), callerBytes: 8 * (weight + 7_350) },
      MAX_ENTRY,
    );
    for (let i = 0; i < 20; i++) indexed.write(`k${i}`, answer(String(i).padStart(10, '0')), heads, 60_000, 0);
    expect(indexed.use()).toEqual({ entries: 8, bytes: 8 * (weight + 7_350) });

    // RESPONSE_CACHE_MAX_ENTRY_BYTES, below an eighth of the bytes: the smaller bound holds.
    const byEntry = createMemoryResponseCache({ maxEntries: 10, maxBytes: 1_000_000, callerBytes: 1_000_000 }, size);
    expect(byEntry.write('fits', answer('x'.repeat(10)), [], 60_000, 0)).toBe(true);
    expect(byEntry.write('over', answer('x'.repeat(11)), [], 60_000, 0)).toBe(false);
  });

  it("keeps a caller's answers within its share: its own oldest make room, other callers' stay", () => {
    const weight = Math.ceil(2.4 * Buffer.byteLength(JSON.stringify(answer('0000'))) + 256);
    const met: string[] = [];
    // Room for 20 answers, 4 per caller (keys `<scope>:<hash>`, as responseCacheKey makes).
    const store = createMemoryResponseCache(
      { maxEntries: 1_000, maxBytes: 20 * weight, callerBytes: 4 * weight },
      MAX_ENTRY,
      { overBudget: (bound) => met.push(bound) },
    );
    for (let i = 0; i < 3; i++) expect(store.write(`victim:${i}`, answer(`v00${i}`), [], 60_000, 0)).toBe(true);
    for (let i = 0; i < 50; i++)
      expect(store.write(`greedy:${i}`, answer(String(i).padStart(4, '0')), [], 60_000, 0)).toBe(true);
    // The victim's three are kept; the greedy caller holds its last four, its others dropped for them.
    for (let i = 0; i < 3; i++) expect(store.lookup(`victim:${i}`).answer?.result).toEqual(answer(`v00${i}`));
    expect(
      Array.from({ length: 50 }, (_, i) => store.lookup(`greedy:${i}`).answer !== undefined).lastIndexOf(false),
    ).toBe(45);
    expect(store.use()).toEqual({ entries: 7, bytes: 7 * weight });
    expect(met).toEqual(Array(46).fill('caller'));
    // Replacing one of its own answers makes room with that answer first.
    expect(store.write('greedy:49', answer('agai'), [], 60_000, 0)).toBe(true);
    expect(store.lookup('greedy:46').answer).toBeDefined();
    expect(met).toHaveLength(46);
    // An answer weighing more than a whole share is never kept.
    const narrow = createMemoryResponseCache(
      { maxEntries: 1_000, maxBytes: 100 * weight, callerBytes: 2 * weight },
      MAX_ENTRY,
      { overBudget: (bound) => met.push(bound) },
    );
    expect(narrow.write('greedy:big', answer('x'.repeat(300)), [], 60_000, 0)).toBe(false);
    expect(met).toHaveLength(47);
  });

  it("keeps an address's answers within a share too, whatever tokens it sends: made-up tokens cannot push another address's out", () => {
    const weight = Math.ceil(2.4 * Buffer.byteLength(JSON.stringify(answer('0000'))) + 256);
    const met: string[] = [];
    const store = createMemoryResponseCache(
      { maxEntries: 1_000, maxBytes: 20 * weight, callerBytes: 4 * weight },
      MAX_ENTRY,
      { overBudget: (bound) => met.push(bound) },
    );
    for (let i = 0; i < 3; i++)
      expect(store.write(`victim:${i}`, answer(`v00${i}`), [], 60_000, 0, 'address:203.0.113.1')).toBe(true);
    // Thirty made-up tokens from one address, two answers each: each token under its share, the address far over.
    for (let token = 0; token < 30; token++)
      for (let i = 0; i < 2; i++)
        store.write(
          `made-up-${token}:${i}`,
          answer(String(token * 2 + i).padStart(4, '0')),
          [],
          60_000,
          0,
          'address:198.51.100.7',
        );
    for (let i = 0; i < 3; i++) expect(store.lookup(`victim:${i}`).answer?.result).toEqual(answer(`v00${i}`));
    // The address holds its share: its last four answers.
    expect(store.use()).toEqual({ entries: 7, bytes: 7 * weight });
    expect(store.lookup('made-up-29:1').answer).toBeDefined();
    expect(store.lookup('made-up-27:1').answer).toBeUndefined();
    expect(met.length).toBeGreaterThan(0);
  });

  it('keeps an answer keepExpiredMs past its TTL for `stale` only, and a write evicts it', async () => {
    const store = createMemoryResponseCache({ maxEntries: 10, maxBytes: 100_000, callerBytes: 100_000 }, MAX_ENTRY, {
      keepExpiredMs: 150,
    });
    store.write('kept', answer('kept'), [head('1')], 50, 0);
    store.write('evicted', answer('evicted'), [head('2')], 50, 0);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(store.lookup('kept')).toEqual({ epoch: 0 });
    expect(store.stale('kept')?.result).toEqual(answer('kept'));
    store.invalidate([head('2')]);
    expect(store.stale('evicted')).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(store.stale('kept')).toBeUndefined();
    expect(store.use().entries).toBe(0);
  });

  it('keeps a copy: what the plugin does to the answer it served afterwards is not kept', () => {
    const store = createMemoryResponseCache({ maxEntries: 10, maxBytes: 10_000, callerBytes: 10_000 }, MAX_ENTRY);
    const served: { data: { head: { name: string } }; stringify?: () => string } = answer('kept');
    store.write('k', served, [], 60_000, 0);
    served.data.head.name = 'changed';
    served.stringify = () => 'not JSON';
    const found = store.lookup('k');
    expect(found.answer?.result).toEqual(answer('kept'));
  });

  it('finds answers by Type:id and by whole type, and forgets an entry past its TTL', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const store = createMemoryResponseCache({ maxEntries: 10, maxBytes: 100_000, callerBytes: 100_000 }, MAX_ENTRY);
      store.write('one', answer('1'), [head('h1')], 60_000, 0);
      store.write('both', answer('1 and 2'), [head('h1'), head('h2')], 60_000, 0);
      store.write('listing', answer('count'), [{ typename: 'HeadConnection' }], 1_000, 0);
      expect(store.invalidate([head('h2')])).toBe(1);
      expect(store.lookup('both')).toEqual({ epoch: 1 });
      expect(store.lookup('one')).toMatchObject({ answer: { result: answer('1') } });
      expect(store.invalidate([{ typename: 'Head' }])).toBe(1);
      expect(store.lookup('one')).toEqual({ epoch: 2 });
      expect(store.lookup('listing')).toMatchObject({ answer: { expiresAt: Date.now() + 1_000 } });
      vi.advanceTimersByTime(1_000);
      expect(store.lookup('listing')).toEqual({ epoch: 2 });
      expect(store.use().entries).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('the cache over a store', () => {
  it('serves a hit with its expiry, and does not store an answer read before an invalidation', async () => {
    const events = counting();
    const cache = new ResponseCache(
      createMemoryResponseCache({ maxEntries: 10, maxBytes: 10_000, callerBytes: 10_000 }, MAX_ENTRY),
      events,
      10_000,
    );
    expect(cache.get('k')).toBeNull();
    await cache.evict([head('other')]);
    cache.set('k', answer('read before the write'), [head('h')], 60_000);
    expect(cache.get('k')).toBeNull();
    cache.set('k', answer('read after it'), [head('h')], 60_000);
    const hit = cache.get('k') as Record<symbol, unknown> | null;
    expect(hit).toMatchObject(answer('read after it'));
    expect(hit?.[expiresAtKey]).toBeGreaterThan(Date.now() + 59_000);
    expect(events.counts).toMatchObject({ hit: 1, miss: 2, invalidated: 1, failed: 0 });
  });

  it('does not store an answer whose miss it never saw', () => {
    const cache = new ResponseCache(
      createMemoryResponseCache({ maxEntries: 10, maxBytes: 10_000, callerBytes: 10_000 }, MAX_ENTRY),
      counting(),
      10_000,
    );
    cache.set('k', answer('unasked'), [], 60_000);
    expect(cache.get('k')).toBeNull();
  });

  it('fails open: a store that throws or rejects is a miss, an answer not kept, an eviction not made; nothing is thrown or left unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const fail = () => {
        throw new Error('store down');
      };
      const reject = () => Promise.reject(new Error('store down'));
      for (const broken of [fail, reject]) {
        const store: GuardedStore<number> = { lookup: broken, stale: broken, write: broken, invalidate: broken };
        const events = counting();
        const cache = new ResponseCache(store, events, 10_000);
        expect(await cache.get('k')).toBeNull();
        expect(await cache.stale('k')).toBeUndefined();
        cache.set('k', answer('x'), [], 60_000);
        cache.invalidate([head('h')]);
        await expect(cache.evict([head('h')])).resolves.toBeUndefined();
        await cache.settled();
        expect(events.counts.miss).toBe(1);
        expect(events.failures).toEqual(['lookup', 'invalidate', 'invalidate']);
      }
      // A store that works on the lookup but fails on the write.
      const flaky: GuardedStore<number> = {
        ...createMemoryResponseCache({ maxEntries: 10, maxBytes: 10_000, callerBytes: 10_000 }, MAX_ENTRY),
        write: reject,
      };
      const events = counting();
      const cache = new ResponseCache(flaky, events, 10_000);
      expect(cache.get('k')).toBeNull();
      cache.set('k', answer('x'), [], 60_000);
      await new Promise((resolve) => setImmediate(resolve));
      expect(events.failures).toEqual(['write']);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('settles only once the invalidations under way are done', async () => {
    let finish!: () => void;
    const slow = createMemoryResponseCache({ maxEntries: 10, maxBytes: 10_000, callerBytes: 10_000 }, MAX_ENTRY);
    const store: GuardedStore<number> = {
      ...slow,
      invalidate: () => new Promise<number>((resolve) => (finish = () => resolve(0))),
    };
    const cache = new ResponseCache(store, counting(), 10_000);
    expect(cache.settled()).toBeUndefined();
    cache.invalidate([head('h')]);
    let settled = false;
    void cache.settled()!.then(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(false);
    finish();
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBe(true);
    expect(cache.settled()).toBeUndefined();
  });
});
