import type { Cache } from '@envelop/response-cache';
import type { ExecutionResult } from 'graphql';
import type { PromiseOrValue } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import { serialise } from '../http/serialisation.js';
import { isPromise } from '../pipeline/stages.js';

import type { CacheEntityRecord } from '../request-state.js';

export type { CacheEntityRecord };

/** A cached answer and when it expires (ms since 1970, on the clock of the process that kept it), for `max-age`. */
export interface CachedAnswer {
  readonly result: ExecutionResult;
  readonly expiresAt: number;
  /** When it was stored (ms since 1970), what its `Age` counts from; undefined for one an older build kept. */
  readonly storedAt?: number | undefined;
  /** Its JSON as kept (`answerJson`), when the store has it: what a client is sent. */
  readonly json?: string;
}

/** A lookup's outcome: the answer, or on a miss the store's epoch to write the fresh answer with. */
export type Lookup<Epoch> =
  | { readonly answer: CachedAnswer; readonly epoch?: undefined }
  | { readonly answer?: undefined; readonly epoch: Epoch };

/**
 * A store of the response cache. envelop's `Cache` (`get`, `set`, `invalidate`) cannot say what is
 * left of an entry's TTL nor whether a write came between a miss and its `set`, so the store
 * offers these three, and `ResponseCache` implements envelop's `Cache` for the plugin over them:
 *
 * - `lookup(key)`: the answer and when it expires, or on a miss where the store's invalidations
 *   stand (an `Epoch`, opaque to the cache), read in the same round trip.
 * - `write(key, result, entities, ttlMs, since, address)`: store `result` for `ttlMs`, charged to
 *   its caller's share (the key's scope) and to its client `address`'s, findable by each of
 *   `entities` (`Type:id`, and `Type` alone for a record without an id, and also for each
 *   record with one), only if no invalidation since the epoch `since` concerns it, checked
 *   atomically with the write; false when not stored. Memory: one epoch raised by every
 *   invalidation; Redis: per-entity invalidation times against the lookup's (a Lua script per slot).
 * - `stale(key)`: the answer kept under `key` even if past its TTL: a store keeps each answer
 *   that much longer than its TTL (RESPONSE_CACHE_STALE_IF_ERROR_MS), in its indexes too, so a
 *   write evicts it as it evicts a fresh one; `lookup` never answers with it.
 * - `invalidate(entities)`: evict every answer findable by one of `entities` (`Type:id` for a
 *   record with an id, `Type` for one without) and move the epoch on, atomically; resolves (with
 *   the count evicted, if the store knows it) once no process can read them any more. Callers
 *   await it.
 *
 * Any of them may throw or reject (Redis unreachable): `ResponseCache` takes that as a miss, an
 * answer not kept, an eviction not made (fail open). The answer kept is a copy made from its
 * JSON (`answerJson`): nothing a later plugin does to the answer it served is kept with it.
 */
export interface GuardedStore<Epoch extends {}> {
  lookup(key: string): PromiseOrValue<Lookup<Epoch>>;
  /**
   * The answer kept under `key`, past its TTL too while the store keeps it (RESPONSE_CACHE_STALE_IF_ERROR_MS), or
   * undefined.
   */
  stale(key: string): PromiseOrValue<CachedAnswer | undefined>;
  write(
    key: string,
    result: ExecutionResult,
    entities: Iterable<CacheEntityRecord>,
    ttlMs: number,
    since: Epoch,
    address?: string,
  ): PromiseOrValue<boolean>;
  invalidate(entities: Iterable<CacheEntityRecord>): PromiseOrValue<number | undefined>;
}

/**
 * What a store keeps of an answer, as JSON: its data and extensions, serialised as every answer
 * is (http/serialisation.ts): the body a client is sent for a hit.
 */
export const answerJson = (result: ExecutionResult): string => serialise(result);

/**
 * The scope a cache key names (`responseCacheKey`: `<scope>:<hash>`): the caller an answer is kept
 * for, as the byte bounds charge it; '' for a key without one.
 */
export function scopeOfKey(key: string): string {
  const colon = key.indexOf(':');
  return colon === -1 ? '' : key.slice(0, colon);
}

/** Which byte bound an answer met as it was stored: the cache's whole budget, or its caller's share of it. */
export type ByteBound = 'total' | 'caller';

/** What `ResponseCache` reports, for the metrics. */
export interface ResponseCacheEvents {
  hit(): void;
  miss(): void;
  /** One invalidation: the entities asked for, and the answers evicted (when the store says). */
  invalidated(entities: number, evicted: number | undefined): void;
  /**
   * An answer kept past its TTL found for a read that failed upstream (RESPONSE_CACHE_STALE_IF_ERROR_MS), served
   * instead.
   */
  stale(): void;
  /**
   * A store call that threw or rejected, answered as a miss (`lookup`), not stored (`write`) or
   * not evicted (`invalidate`: an answer kept before may be served until its TTL).
   */
  failed(call: 'lookup' | 'write' | 'invalidate'): void;
}

/** Where `get` puts a hit's expiry (its answer is a copy with this key in it). */
export const expiresAtKey = Symbol('response-cache.expires-at');

/**
 * Misses remembered until their answer is stored, at most (an operation that is not stored leaves its miss behind until
 * it expires).
 */
const PENDING_MISSES = 10_000;

/** `run()`'s value through `ok`, or `failed`'s when it throws or rejects; synchronous when `run` is. */
function guarded<T, R>(run: () => PromiseOrValue<T>, ok: (value: T) => R, failed: () => R): PromiseOrValue<R> {
  let value: PromiseOrValue<T>;
  try {
    value = run();
  } catch {
    return failed();
  }
  return isPromise(value) ? value.then(ok, failed) : ok(value);
}

/**
 * The cache the response-cache plugin is handed, over any `GuardedStore`:
 * - fails open: a store that throws or rejects is a miss, an answer not stored, an eviction not
 *   made; never a failed request, never an unhandled rejection;
 * - a miss remembers the store's epoch (and its caller's address) under its key, and the answer is stored only if no
 *   invalidation came in between (the earliest miss of a key counts, so a read that began
 *   before a write is never stored after it; one that began after may lose its turn, not more);
 * - invalidations are tracked until done: the plugin does not await those it makes for a
 *   mutation's returned objects, the gateway awaits `settled()` before answering.
 */
export class ResponseCache<Epoch extends {} = object> implements Cache {
  readonly #pending: LRUCache<string, { readonly since: Epoch; readonly address: string | undefined }>;
  readonly #invalidating = new Set<Promise<unknown>>();
  readonly #alsoHeld = new WeakMap<ExecutionResult, readonly CacheEntityRecord[]>();

  constructor(
    private readonly store: GuardedStore<Epoch>,
    private readonly events: ResponseCacheEvents,
    /** How long a miss waits for its answer at most: the operation's deadline. */
    answerWithinMs: number,
  ) {
    this.#pending = new LRUCache({ max: PENDING_MISSES, ttl: answerWithinMs, ttlAutopurge: false });
  }

  /**
   * The answer kept under `key`, or undefined: on a miss (or a store that fails) the store's epoch
   * is remembered, so the fresh answer is stored only if no invalidation came in between.
   */
  lookup(key: string, address?: string): PromiseOrValue<CachedAnswer | undefined> {
    return guarded(
      () => this.store.lookup(key),
      ({ answer, epoch }) => {
        if (answer === undefined) {
          if (!this.#pending.has(key)) this.#pending.set(key, { since: epoch, address });
          this.events.miss();
          return undefined;
        }
        this.events.hit();
        return answer;
      },
      () => {
        this.events.failed('lookup');
        this.events.miss();
        return undefined;
      },
    );
  }

  /** envelop's lookup, for a plugin that looks up itself (tests of a store through yoga's plugin). */
  get(key: string): PromiseOrValue<ExecutionResult | null> {
    const answer = this.lookup(key);
    const result = (kept: CachedAnswer | undefined) =>
      kept === undefined ? null : { ...kept.result, [expiresAtKey]: kept.expiresAt };
    return isPromise(answer) ? answer.then(result) : result(answer);
  }

  /**
   * The answer kept under `key` past its TTL (or still fresh), for a read that failed; undefined when none, or the
   * store fails.
   */
  stale(key: string): PromiseOrValue<CachedAnswer | undefined> {
    return guarded(
      () => this.store.stale(key),
      (answer) => {
        // Kept again since the read's lookup (another request's answer): a hit.
        if (answer !== undefined && answer.expiresAt <= Date.now()) this.events.stale();
        else if (answer !== undefined) this.events.hit();
        return answer;
      },
      () => undefined,
    );
  }

  set(key: string, result: ExecutionResult, entities: Iterable<CacheEntityRecord>, ttl: number): void {
    const miss = this.#pending.get(key);
    this.#pending.delete(key);
    // Its miss forgotten (or never seen): whether a write came in between is unknown.
    if (miss === undefined) return;
    // Read now: the plugin hands an iterator over its own map.
    const held = [...entities, ...(this.#alsoHeld.get(result) ?? [])];
    void guarded(
      () => this.store.write(key, result, held, ttl, miss.since, miss.address),
      () => undefined,
      () => this.events.failed('write'),
    );
  }

  /**
   * Types `result` holds that the plugin does not report (it reports objects with an id, and the
   * types of null or empty fields): kept with the answer when it is stored, so that invalidating
   * the whole type evicts it.
   */
  alsoHolds(result: ExecutionResult, types: readonly CacheEntityRecord[]): void {
    this.#alsoHeld.set(result, types);
  }

  /** The plugin's, for a mutation's returned objects: made at once, awaited through `settled`. */
  invalidate(entities: Iterable<CacheEntityRecord>): void {
    void this.evict([...entities]);
  }

  /** Evicts every answer holding one of `entities`; resolves once done (or failed: fail open). */
  evict(entities: readonly CacheEntityRecord[]): Promise<void> {
    const done = Promise.resolve(
      guarded(
        () => this.store.invalidate(entities),
        (evicted) => {
          this.events.invalidated(entities.length, typeof evicted === 'number' ? evicted : undefined);
        },
        () => {
          this.events.failed('invalidate');
        },
      ),
    );
    this.#invalidating.add(done);
    void done.finally(() => this.#invalidating.delete(done));
    return done;
  }

  /** Resolves once every invalidation under way now is done; undefined when there is none. */
  settled(): Promise<void> | undefined {
    return this.#invalidating.size === 0 ? undefined : Promise.all(this.#invalidating).then(() => undefined);
  }
}

/** What the plugin uses of a `ResponseCache`, whatever its store's epoch. */
export type GatewayCache = Pick<ResponseCache, keyof Cache | 'lookup' | 'alsoHolds' | 'evict' | 'settled' | 'stale'>;
