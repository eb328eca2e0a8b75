import type { ExecutionResult } from 'graphql';
import { LRUCache } from 'lru-cache';
import type { ResponseCacheSettings } from '../../config.js';
import { answerJson, scopeOfKey, type ByteBound, type CacheEntityRecord, type CachedAnswer, type GuardedStore, type Lookup } from './cache.js';
import { indexNamesOf, invalidatedNameOf } from './index-names.js';

/** The store in memory: synchronous, and it can say what it holds. Its epoch is a number raised by every invalidation. */
export interface MemoryResponseCache extends GuardedStore<number> {
  lookup(key: string): Lookup<number>;
  stale(key: string): CachedAnswer | undefined;
  write(key: string, result: ExecutionResult, entities: Iterable<CacheEntityRecord>, ttlMs: number, since: number): boolean;
  invalidate(entities: Iterable<CacheEntityRecord>): number;
  use(): { entries: number; bytes: number };
}

interface Entry extends CachedAnswer {
  readonly index: Set<string>;
  /** What it weighs (`weightOf`), charged to its caller's scope. */
  readonly weight: number;
}

/** A caller's answers kept (their keys, oldest stored first) and what they weigh together. */
interface Scope {
  bytes: number;
  readonly keys: Set<string>;
}

/**
 * What a kept answer costs the heap, estimated: its JSON text (a byte a character), the answer
 * made from it (1.3 bytes a byte of JSON), its index keys (`Type:id` in two sets: some 350 bytes
 * each) and the entry. Measured with heap use after a collection, answers of 1 to 100 heads with
 * their hair: 4.6 to 5.7 heap bytes a byte of JSON, within 3 % of this estimate (docs/performance.md#measured-reasons).
 */
const BYTES_PER_JSON_BYTE = 2.4;
const BYTES_PER_INDEX_KEY = 350;
const BYTES_PER_ENTRY = 256;
const weightOf = (jsonBytes: number, indexKeys: number) => Math.ceil(BYTES_PER_JSON_BYTE * jsonBytes + BYTES_PER_INDEX_KEY * indexKeys + BYTES_PER_ENTRY);

/**
 * The response cache in this process's memory: an lru-cache bounded by count and by the heap its
 * answers hold, estimated (`weightOf`: counting the JSON alone let 64 MiB of it hold 320 MB of
 * heap); an answer over `maxEntryBytes` of JSON, or over an eighth of the bytes, is not kept, so
 * one answer cannot empty the cache. A caller's answers (`scopeOfKey`) weigh at most
 * `callerBytes` together (RESPONSE_CACHE_CALLER_SHARE): past it, its own oldest answers make room,
 * so one caller cannot push every other's answers out. With an index from `Type` and `Type:id` to
 * the answers that hold them.
 * @envelop/response-cache's own in-memory cache bounds the count only and cannot tell what is
 * left of an entry's TTL; the index here is the same as its.
 *
 * An answer is kept as a copy made from its JSON: nothing a later plugin does to the answer it
 * served (graphql-jit's serialiser, the size limit's wrapper) is kept with it.
 */
export function createMemoryResponseCache(
  bounds: ResponseCacheSettings['bounds'],
  maxEntryBytes: number,
  options: {
    /** Called with the bound an answer met as it was stored (a caller's share). */
    readonly overBudget?: (bound: ByteBound) => void;
    /** How long past its TTL an answer is kept for `stale` (RESPONSE_CACHE_STALE_IF_ERROR_MS). @default 0 */
    readonly keepExpiredMs?: number;
  } = {},
): MemoryResponseCache {
  const { overBudget, keepExpiredMs = 0 } = options;
  const byIndexKey = new Map<string, Set<string>>();
  // One per caller with answers kept: as many as the entries at most.
  const scopes = new Map<string, Scope>();
  const forget = (key: string, entry: Entry) => {
    for (const indexKey of entry.index) {
      const keys = byIndexKey.get(indexKey);
      keys?.delete(key);
      if (keys?.size === 0) byIndexKey.delete(indexKey);
    }
    const scope = scopes.get(scopeOfKey(key));
    if (scope === undefined) return;
    scope.bytes -= entry.weight;
    scope.keys.delete(key);
    if (scope.keys.size === 0) scopes.delete(scopeOfKey(key));
  };
  const answers = new LRUCache<string, Entry>({
    max: bounds.maxEntries,
    maxSize: bounds.maxBytes,
    maxEntrySize: Math.max(1, Math.floor(bounds.maxBytes / 8)),
    // Set by `write` from the JSON it made anyway.
    sizeCalculation: () => 1,
    dispose: (entry, key) => forget(key, entry),
  });
  // Raised by every invalidation: a write of an answer read before it is refused.
  let epoch = 0;

  /** The entry under `key`, dropped (and undefined) once past its TTL and the time it is kept past it. */
  const kept = (key: string, read: 'get' | 'peek'): Entry | undefined => {
    const entry = answers[read](key);
    // Checked here, lazily: an entry past its time is dropped as it is read.
    if (entry !== undefined && entry.expiresAt + keepExpiredMs <= Date.now()) {
      answers.delete(key);
      return undefined;
    }
    return entry;
  };

  const lookup = (key: string): Lookup<number> => {
    const entry = kept(key, 'get');
    // Past its TTL, an answer is kept for `stale` only.
    return entry === undefined || entry.expiresAt <= Date.now() ? { epoch } : { answer: entry };
  };

  const write = (key: string, result: ExecutionResult, entities: Iterable<CacheEntityRecord>, ttlMs: number, since: number): boolean => {
    if (since !== epoch || !(ttlMs > 0)) return false;
    const json = answerJson(result);
    if (Buffer.byteLength(json) > maxEntryBytes) return false;
    const index = indexNamesOf(entities);
    const size = weightOf(json.length, index.size);
    if (size > answers.maxEntrySize) return false;
    if (size > bounds.callerBytes) {
      overBudget?.('caller');
      return false;
    }
    // What it replaces, then its caller's oldest answers, until it fits in the caller's share.
    answers.delete(key);
    const name = scopeOfKey(key);
    const mine = scopes.get(name);
    if (mine !== undefined && mine.bytes + size > bounds.callerBytes) {
      overBudget?.('caller');
      for (const oldest of mine.keys) {
        if (mine.bytes + size <= bounds.callerBytes) break;
        answers.delete(oldest);
      }
    }
    const entry: Entry = { result: JSON.parse(json) as ExecutionResult, json, expiresAt: Date.now() + ttlMs, index, weight: size };
    answers.set(key, entry, { size });
    const scope = scopes.get(name) ?? { bytes: 0, keys: new Set<string>() };
    scopes.set(name, scope);
    scope.bytes += size;
    scope.keys.add(key);
    // A replaced entry was unindexed by `dispose` (noDisposeOnSet is off).
    for (const indexKey of entry.index) {
      let keys = byIndexKey.get(indexKey);
      if (keys === undefined) byIndexKey.set(indexKey, (keys = new Set()));
      keys.add(key);
    }
    return true;
  };

  const invalidate = (entities: Iterable<CacheEntityRecord>): number => {
    epoch++;
    let evicted = 0;
    for (const entity of entities) {
      const keys = byIndexKey.get(invalidatedNameOf(entity));
      for (const key of keys === undefined ? [] : [...keys]) if (answers.delete(key)) evicted++;
    }
    return evicted;
  };

  return {
    lookup,
    // Not a use: it does not make the answer recently used.
    stale: (key) => kept(key, 'peek'),
    write,
    invalidate,
    use: () => ({ entries: answers.size, bytes: answers.calculatedSize }),
  };
}
