import { LRUCache } from 'lru-cache';
import type { ResponseCacheSettings } from '../../config.js';
import { type CachedAnswer, scopeOfKey } from './cache.js';

export interface Entry extends CachedAnswer {
  /** The names it is indexed by (`indexNamesOf`). */
  readonly index: Set<string>;
  /** Its weight (memory-store.ts's `weightOf`), charged to the cache's bytes, its caller's scope and its address's. */
  readonly weight: number;
  /** Its caller's client address (`address:…`), whose answers share one share too. */
  readonly address?: string | undefined;
}

/** The store in memory's answers: an lru-cache indexed by name (`Type`, `Type:id`), by caller and by client address. */
export class MemoryAnswers {
  readonly #lru: LRUCache<string, Entry>;
  readonly #byName = new Map<string, Set<string>>();
  // Per caller and per address with answers kept (twice the entries at most): their keys, oldest first, and weight.
  readonly #scopes = new Map<string, { bytes: number; readonly keys: Set<string> }>();

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

  get maxEntrySize(): number {
    return this.#lru.maxEntrySize;
  }

  /** The entry under `key` (`peek`: not made recently used); dropped as read once past its TTL and `keepExpiredMs`. */
  find(key: string, read: 'get' | 'peek'): Entry | undefined {
    const entry = this.#lru[read](key);
    if (entry !== undefined && entry.expiresAt + this.keepExpiredMs <= Date.now()) {
      this.#lru.delete(key);
      return undefined;
    }
    return entry;
  }

  /** Keeps `entry`, its caller's and its address's oldest answers making room in their shares: true if they had to. */
  keep(key: string, entry: Entry): boolean {
    this.#lru.delete(key);
    const names = scopesOf(key, entry);
    let met = false;
    for (const name of names) met = this.#makeRoom(name, entry.weight) || met;
    this.#lru.set(key, entry, { size: entry.weight });
    for (const name of names) {
      const scope = this.#scopes.get(name) ?? { bytes: 0, keys: new Set<string>() };
      this.#scopes.set(name, scope);
      scope.bytes += entry.weight;
      scope.keys.add(key);
    }
    // A replaced entry was unindexed by `dispose` (noDisposeOnSet is off).
    for (const indexName of entry.index) {
      const keys = this.#byName.get(indexName) ?? new Set<string>();
      this.#byName.set(indexName, keys.add(key));
    }
    return met;
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

  /** Drops every answer indexed by `name` (`invalidatedNameOf`): how many there were. */
  evict(name: string): number {
    let evicted = 0;
    for (const key of [...(this.#byName.get(name) ?? [])]) if (this.#lru.delete(key)) evicted++;
    return evicted;
  }

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
