import type { ExecutionResult } from 'graphql';
import { LRUCache } from 'lru-cache';
import type { ResponseCacheSettings } from '../../config.js';
import type { CacheEntityRecord } from '../request-state.js';
import { answerJson, type ByteBound, type CachedAnswer, type GuardedStore, type Lookup, scopeOfKey } from './cache.js';
import { indexNamesOf, invalidatedNameOf } from './index-names.js';

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

interface Entry extends CachedAnswer {
  /** The names it is indexed by (`indexNamesOf`). */
  readonly index: Set<string>;
  /** Its `weightOf`, charged to the cache's bytes, its caller's scope and its address's. */
  readonly weight: number;
  /** Its caller's client address (`address:…`), whose answers share one share too. */
  readonly address?: string | undefined;
}

/**
 * The response cache in this process's memory, bounded by count and by the heap its answers hold (`weightOf`: counting
 * the JSON alone let 64 MiB of it hold 320 MB of heap). An answer over `maxEntryBytes` or an eighth of the bytes is not
 * kept; past its caller's share (RESPONSE_CACHE_CALLER_SHARE) or its address's, its own oldest answers make room, so
 * neither a caller nor an address making up tokens can push every other's out. Answers are copies made from their
 * JSON: nothing a later plugin does to one it served is kept.
 */
export function createMemoryResponseCache(
  bounds: ResponseCacheSettings['bounds'],
  maxEntryBytes: number,
  options: MemoryResponseCacheOptions = {},
): MemoryResponseCache {
  return new MemoryStore(bounds, maxEntryBytes, options);
}

/** An lru-cache of answers indexed by name (`Type`, `Type:id`), by caller and by client address. */
class MemoryStore implements MemoryResponseCache {
  readonly #lru: LRUCache<string, Entry>;
  readonly #byName = new Map<string, Set<string>>();
  // Per caller and per address with answers kept (twice the entries at most): their keys, oldest first, and weight.
  readonly #scopes = new Map<string, { bytes: number; readonly keys: Set<string> }>();
  // Raised by every invalidation: a write of an answer read before it is refused.
  #epoch = 0;

  constructor(
    private readonly bounds: ResponseCacheSettings['bounds'],
    private readonly maxEntryBytes: number,
    private readonly options: MemoryResponseCacheOptions,
  ) {
    this.#lru = new LRUCache<string, Entry>({
      max: bounds.maxEntries,
      maxSize: bounds.maxBytes,
      maxEntrySize: Math.max(1, Math.floor(bounds.maxBytes / 8)),
      // Set by `write`: the entry's weight, from the JSON the store made anyway.
      sizeCalculation: () => 1,
      dispose: (entry, key) => this.#forget(key, entry),
    });
  }

  // Own properties, not methods: a store is spread and its `use` passed on unbound.
  readonly lookup = (key: string): Lookup<number> => {
    const entry = this.#find(key, 'get');
    // Past its TTL, an answer is kept for `stale` only.
    return entry === undefined || entry.expiresAt <= Date.now() ? { epoch: this.#epoch } : { answer: entry };
  };

  readonly stale = (key: string): CachedAnswer | undefined => this.#find(key, 'peek');

  readonly write: MemoryResponseCache['write'] = (key, result, entities, ttlMs, since, address) => {
    if (since !== this.#epoch || !(ttlMs > 0)) return false;
    const json = answerJson(result);
    if (Buffer.byteLength(json) > this.maxEntryBytes) return false;
    const index = indexNamesOf(entities);
    const weight = weightOf(json.length, index.size);
    if (weight > this.#lru.maxEntrySize) return false;
    if (weight > this.bounds.callerBytes) {
      this.options.overBudget?.('caller');
      return false;
    }
    const storedAt = Date.now();
    const copy = JSON.parse(json) as ExecutionResult;
    this.#lru.delete(key);
    const entry: Entry = { result: copy, json, storedAt, expiresAt: storedAt + ttlMs, index, weight, address };
    const scopes = scopesOf(key, entry);
    let met = false;
    for (const name of scopes) met = this.#makeRoom(name, weight) || met;
    this.#lru.set(key, entry, { size: weight });
    for (const name of scopes) {
      const scope = this.#scopes.get(name) ?? { bytes: 0, keys: new Set<string>() };
      this.#scopes.set(name, scope);
      scope.bytes += weight;
      scope.keys.add(key);
    }
    // A replaced entry was unindexed by `dispose` (noDisposeOnSet is off).
    for (const name of index) this.#byName.set(name, (this.#byName.get(name) ?? new Set<string>()).add(key));
    if (met) this.options.overBudget?.('caller');
    return true;
  };

  readonly invalidate = (entities: Iterable<CacheEntityRecord>): number => {
    this.#epoch++;
    let evicted = 0;
    for (const entity of entities) {
      const keys = [...(this.#byName.get(invalidatedNameOf(entity)) ?? [])];
      for (const key of keys) if (this.#lru.delete(key)) evicted++;
    }
    return evicted;
  };

  readonly use = () => ({ entries: this.#lru.size, bytes: this.#lru.calculatedSize });

  /** The entry under `key` (`peek`: not made recently used); dropped as read once past its TTL and `keepExpiredMs`. */
  #find(key: string, read: 'get' | 'peek'): Entry | undefined {
    const entry = this.#lru[read](key);
    if (entry !== undefined && entry.expiresAt + (this.options.keepExpiredMs ?? 0) <= Date.now()) {
      this.#lru.delete(key);
      return undefined;
    }
    return entry;
  }

  /** Drops the scope's oldest answers until `weight` more fits in its share: whether it had to. */
  #makeRoom(name: string, weight: number): boolean {
    const scope = this.#scopes.get(name);
    if (scope === undefined || scope.bytes + weight <= this.bounds.callerBytes) return false;
    for (const oldest of scope.keys) {
      if (scope.bytes + weight <= this.bounds.callerBytes) break;
      this.#lru.delete(oldest);
    }
    return true;
  }

  /** Unindexes the answer `entry` under `key`, once the lru-cache has dropped it. */
  #forget(key: string, entry: Entry): void {
    for (const name of entry.index) {
      const keys = this.#byName.get(name);
      keys?.delete(key);
      if (keys?.size === 0) this.#byName.delete(name);
    }
    for (const name of scopesOf(key, entry)) {
      const scope = this.#scopes.get(name);
      if (scope === undefined) continue;
      scope.bytes -= entry.weight;
      scope.keys.delete(key);
      if (scope.keys.size === 0) this.#scopes.delete(name);
    }
  }
}

/** The scopes an answer is charged to: its caller's (the key's), and its address's when it has one. */
const scopesOf = (key: string, entry: Entry): readonly string[] =>
  entry.address === undefined ? [scopeOfKey(key)] : [scopeOfKey(key), entry.address];
