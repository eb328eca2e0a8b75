import { LRUCache } from 'lru-cache';
import type { ResponseCacheSettings } from '../../config.js';
import { scopeOfKey, type CachedAnswer } from './cache.js';

/** An answer the store in memory keeps. */
export interface Entry extends CachedAnswer {
  /** The names it is indexed by (`indexNamesOf`). */
  readonly index: Set<string>;
  /** What it weighs (memory-store.ts's `weightOf`), charged to the cache's bytes and to its caller's scope. */
  readonly weight: number;
}

/** A caller's answers kept (their keys, oldest stored first) and what they weigh together. */
interface Scope {
  bytes: number;
  readonly keys: Set<string>;
}

/**
 * The answers the store in memory keeps: an lru-cache bounded by count and by weight (an answer
 * over an eighth of `bounds.maxBytes` is not kept, so one answer cannot empty the cache), indexed
 * by name (`Type` and `Type:id` to the answers that hold them) and by caller (`scopeOfKey`), whose
 * answers weigh at most `bounds.callerBytes` together. An answer past its TTL and the time it is
 * kept past it is dropped as it is read.
 */
export class MemoryAnswers {
  readonly #lru: LRUCache<string, Entry>;
  readonly #byName = new Map<string, Set<string>>();
  // One per caller with answers kept: as many as the entries at most.
  readonly #scopes = new Map<string, Scope>();

  constructor(
    private readonly bounds: ResponseCacheSettings['bounds'],
    private readonly keepExpiredMs: number,
  ) {
    this.#lru = new LRUCache<string, Entry>({
      max: bounds.maxEntries,
      maxSize: bounds.maxBytes,
      maxEntrySize: Math.max(1, Math.floor(bounds.maxBytes / 8)),
      // Set by `keep`: the entry's weight, from the JSON the store made anyway.
      sizeCalculation: () => 1,
      dispose: (entry, key) => this.#forget(key, entry),
    });
  }

  /** The largest weight one answer may have. */
  get maxEntrySize(): number {
    return this.#lru.maxEntrySize;
  }

  /** The entry under `key` (`peek`: not made recently used), dropped (and undefined) once past its TTL and the time it is kept past it. */
  find(key: string, read: 'get' | 'peek'): Entry | undefined {
    const entry = this.#lru[read](key);
    // Checked here, lazily: an entry past its time is dropped as it is read.
    if (entry !== undefined && entry.expiresAt + this.keepExpiredMs <= Date.now()) {
      this.#lru.delete(key);
      return undefined;
    }
    return entry;
  }

  /**
   * Keeps `entry` under `key`: drops what it replaces, then its caller's oldest answers until it
   * fits in the caller's share. True when the share was met (answers of the caller made room).
   */
  keep(key: string, entry: Entry): boolean {
    this.#lru.delete(key);
    const name = scopeOfKey(key);
    const mine = this.#scopes.get(name);
    const met = mine !== undefined && mine.bytes + entry.weight > this.bounds.callerBytes;
    if (met) {
      for (const oldest of mine.keys) {
        if (mine.bytes + entry.weight <= this.bounds.callerBytes) break;
        this.#lru.delete(oldest);
      }
    }
    this.#lru.set(key, entry, { size: entry.weight });
    const scope = this.#scopes.get(name) ?? { bytes: 0, keys: new Set<string>() };
    this.#scopes.set(name, scope);
    scope.bytes += entry.weight;
    scope.keys.add(key);
    // A replaced entry was unindexed by `dispose` (noDisposeOnSet is off).
    for (const indexName of entry.index) {
      let keys = this.#byName.get(indexName);
      if (keys === undefined) this.#byName.set(indexName, (keys = new Set()));
      keys.add(key);
    }
    return met;
  }

  /** Drops every answer indexed by `name` (`invalidatedNameOf`): how many there were. */
  evict(name: string): number {
    const keys = this.#byName.get(name);
    let evicted = 0;
    for (const key of keys === undefined ? [] : [...keys]) if (this.#lru.delete(key)) evicted++;
    return evicted;
  }

  /** What it holds: its entries and their weight together. */
  use(): { entries: number; bytes: number } {
    return { entries: this.#lru.size, bytes: this.#lru.calculatedSize };
  }

  /** Unindexes the answer `entry` under `key`, once the lru-cache has dropped it. */
  #forget(key: string, entry: Entry): void {
    for (const indexName of entry.index) {
      const keys = this.#byName.get(indexName);
      keys?.delete(key);
      if (keys?.size === 0) this.#byName.delete(indexName);
    }
    const scope = this.#scopes.get(scopeOfKey(key));
    if (scope === undefined) return;
    scope.bytes -= entry.weight;
    scope.keys.delete(key);
    if (scope.keys.size === 0) this.#scopes.delete(scopeOfKey(key));
  }
}
