import type { ExecutionResult } from 'graphql';
import type { ResponseCacheSettings } from '../../config.js';
import { answerJson, type ByteBound, type CachedAnswer, type GuardedStore, type Lookup } from './cache.js';
import { indexNamesOf, invalidatedNameOf } from './index-names.js';
import { type Entry, MemoryAnswers } from './memory-answers.js';

/** The store in memory: synchronous, and it can say what it holds. Its epoch is raised by every invalidation. */
export interface MemoryResponseCache extends GuardedStore<number> {
  lookup(key: string): Lookup<number>;
  stale(key: string): CachedAnswer | undefined;
  write(...args: Parameters<GuardedStore<number>['write']>): boolean;
  invalidate(...args: Parameters<GuardedStore<number>['invalidate']>): number;
  use(): { entries: number; bytes: number };
}

export interface MemoryResponseCacheOptions {
  /** Called with the bound an answer met as it was stored (a caller's share). */
  readonly overBudget?: (bound: ByteBound) => void;
  /** How long past its TTL an answer is kept for `stale` (RESPONSE_CACHE_STALE_IF_ERROR_MS). @default 0 */
  readonly keepExpiredMs?: number;
}

/**
 * What a kept answer costs the heap, estimated: its JSON (a byte a character), the answer made from it (1.3 bytes a
 * byte of JSON), its index keys (`Type:id` in two sets: some 350 bytes each) and the entry. Measured after a
 * collection, answers of 1 to 100 heads with their hair: 4.6 to 5.7 heap bytes a JSON byte, within 3 % of this
 * estimate (docs/performance.md#measured-reasons).
 */
const BYTES_PER_JSON_BYTE = 2.4;
const BYTES_PER_INDEX_KEY = 350;
const BYTES_PER_ENTRY = 256;
const weightOf = (jsonBytes: number, indexKeys: number) =>
  Math.ceil(BYTES_PER_JSON_BYTE * jsonBytes + BYTES_PER_INDEX_KEY * indexKeys + BYTES_PER_ENTRY);

/**
 * The response cache in this process's memory (memory-answers.ts), bounded by count and by the heap its answers hold
 * (`weightOf`: counting the JSON alone let 64 MiB of it hold 320 MB of heap). An answer over `maxEntryBytes` or an
 * eighth of the bytes is not kept; past its caller's share (RESPONSE_CACHE_CALLER_SHARE) or its address's, its own
 * oldest answers make room, so neither a caller nor an address making up tokens can push every other's out. Answers
 * are copies made from their JSON: nothing a later plugin does to one it served is kept.
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

  return {
    lookup(key) {
      const entry = answers.find(key, 'get');
      // Past its TTL, an answer is kept for `stale` only.
      return entry === undefined || entry.expiresAt <= Date.now() ? { epoch } : { answer: entry };
    },
    stale: (key) => answers.find(key, 'peek'),
    write(key, result, entities, ttlMs, since, address) {
      if (since !== epoch || !(ttlMs > 0)) return false;
      const json = answerJson(result);
      if (Buffer.byteLength(json) > maxEntryBytes) return false;
      const index = indexNamesOf(entities);
      const weight = weightOf(json.length, index.size);
      if (weight > answers.maxEntrySize) return false;
      if (weight > bounds.callerBytes) {
        overBudget?.('caller');
        return false;
      }
      const storedAt = Date.now();
      const copy = JSON.parse(json) as ExecutionResult;
      const entry: Entry = { result: copy, json, storedAt, expiresAt: storedAt + ttlMs, index, weight, address };
      if (answers.keep(key, entry)) overBudget?.('caller');
      return true;
    },
    invalidate(entities) {
      epoch++;
      let evicted = 0;
      for (const entity of entities) evicted += answers.evict(invalidatedNameOf(entity));
      return evicted;
    },
    use: () => answers.use(),
  };
}
