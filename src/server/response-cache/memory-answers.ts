import { LRUCache } from 'lru-cache';
import type { ResponseCacheSettings } from '../../config.js';
import { type CachedAnswer, scopeOfKey } from './cache.js';

/** An answer the store in memory keeps. */
export interface Entry extends CachedAnswer {
  /** The names it is indexed by (`indexNamesOf`). */
  readonly index: Set<string>;
  /**
   * What it weighs (memory-store.ts's `weightOf`), charged to the cache's bytes, to its caller's scope and to its
   * address's.
   */
  readonly weight: number;
  /** Its caller's client address (`address:…`), whose answers share one share too. */
  readonly address?: string | undefined;
}

/** A caller's answers kept (their keys, oldest stored first) and what they weigh together. */
interface Scope {
  bytes: number;
  readonly keys: Set<string>;
}

/**
 * The answers the store in memory keeps: an lru-cache bounded by count and by weight (an answer
 * over an eighth of `bounds.maxBytes` is not kept, so one answer cannot empty the cache), indexed
 * by name (`Type` and `Type:id` to the answers that hold them), by caller (`scopeOfKey`) and by
 * client address (`Entry.address`), each scope's answers weighing at most `bounds.callerBytes`
 * together. An answer past its TTL and the time it is kept past it is dropped as it is read.
 */
export class MemoryAnswers {
  readonly #lru: LRUCache<string, Entry>;
  readonly #byName = new Map<string, Set<string>>();
  // One per caller and per address with answers kept: twice the entries at most.
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

  /**
   * The entry under `key` (`peek`: not made recently used), dropped (and undefined) once past its TTL and the time it
   * is kept past it.
   */
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
   * Keeps `entry` under `key`: drops what it replaces, then the oldest answers of its caller, and
   * of its address, until it fits in each one's share. True when a share was met (its own answers
   * made room).
   */
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
      let keys = this.#byName.get(indexName);
      if (keys === undefined) {
        keys = new Set();
        this.#byName.set(indexName, keys);
      }
      keys.add(key);
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
