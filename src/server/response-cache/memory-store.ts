import type { ExecutionResult } from 'graphql';
import type { ResponseCacheSettings } from '../../config.js';
import {
  answerJson,
  type ByteBound,
  type CachedAnswer,
  type CacheEntityRecord,
  type GuardedStore,
  type Lookup,
} from './cache.js';
import { indexNamesOf, invalidatedNameOf } from './index-names.js';
import { type Entry, MemoryAnswers } from './memory-answers.js';

/**
 * The store in memory: synchronous, and it can say what it holds. Its epoch is a number raised by every invalidation.
 */
export interface MemoryResponseCache extends GuardedStore<number> {
  lookup(key: string): Lookup<number>;
  stale(key: string): CachedAnswer | undefined;
  write(
    key: string,
    result: ExecutionResult,
    entities: Iterable<CacheEntityRecord>,
    ttlMs: number,
    since: number,
    address?: string,
  ): boolean;
  invalidate(entities: Iterable<CacheEntityRecord>): number;
  use(): { entries: number; bytes: number };
}

export interface MemoryResponseCacheOptions {
  /** Called with the bound an answer met as it was stored (a caller's share). */
  readonly overBudget?: (bound: ByteBound) => void;
  /** How long past its TTL an answer is kept for `stale` (RESPONSE_CACHE_STALE_IF_ERROR_MS). @default 0 */
  readonly keepExpiredMs?: number;
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
const weightOf = (jsonBytes: number, indexKeys: number) =>
  Math.ceil(BYTES_PER_JSON_BYTE * jsonBytes + BYTES_PER_INDEX_KEY * indexKeys + BYTES_PER_ENTRY);

/**
 * The response cache in this process's memory: an lru-cache bounded by count and by the heap its
 * answers hold, estimated (`weightOf`: counting the JSON alone let 64 MiB of it hold 320 MB of
 * heap); an answer over `maxEntryBytes` of JSON, or over an eighth of the bytes, is not kept, so
 * one answer cannot empty the cache. A caller's answers (`scopeOfKey`) weigh at most
 * `callerBytes` together (RESPONSE_CACHE_CALLER_SHARE), and so do those of its client address
 * (whatever tokens it sent): past either, its own oldest answers make room, so neither one caller
 * nor one address making up tokens can push every other's answers out. With an index from `Type` and `Type:id` to
 * the answers that hold them (memory-answers.ts).
 * @envelop/response-cache's own in-memory cache bounds the count only and cannot tell what is
 * left of an entry's TTL; the index here is the same as its.
 *
 * An answer is kept as a copy made from its JSON: nothing a later plugin does to the answer it
 * served (graphql-jit's serialiser, the size limit's wrapper) is kept with it.
 */
export function createMemoryResponseCache(
  bounds: ResponseCacheSettings['bounds'],
  maxEntryBytes: number,
  options: MemoryResponseCacheOptions = {},
): MemoryResponseCache {
  const { overBudget, keepExpiredMs = 0 } = options;
  const answers = new MemoryAnswers(bounds, keepExpiredMs);
  // Raised by every invalidation: a write of an answer read before it is refused.
  let epoch = 0;

  const lookup = (key: string): Lookup<number> => {
    const entry = answers.find(key, 'get');
    // Past its TTL, an answer is kept for `stale` only.
    return entry === undefined || entry.expiresAt <= Date.now() ? { epoch } : { answer: entry };
  };

  const write = (
    key: string,
    result: ExecutionResult,
    entities: Iterable<CacheEntityRecord>,
    ttlMs: number,
    since: number,
    address?: string,
  ): boolean => {
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
    const storedAt = Date.now();
    const entry: Entry = {
      result: JSON.parse(json) as ExecutionResult,
      json,
      storedAt,
      expiresAt: storedAt + ttlMs,
      index,
      weight: size,
      address,
    };
    if (answers.keep(key, entry)) overBudget?.('caller');
    return true;
  };

  const invalidate = (entities: Iterable<CacheEntityRecord>): number => {
    epoch++;
    let evicted = 0;
    for (const entity of entities) evicted += answers.evict(invalidatedNameOf(entity));
    return evicted;
  };

  return {
    lookup,
    // Not a use: it does not make the answer recently used.
    stale: (key) => answers.find(key, 'peek'),
    write,
    invalidate,
    use: () => answers.use(),
  };
}
