import type { Cache } from '@envelop/response-cache';
import type { ExecutionResult } from 'graphql';
import type { PromiseOrValue } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import { serialise } from '../http/serialisation.js';
import { isPromise } from '../pipeline/stages.js';
import type { CacheEntityRecord } from '../request-state.js';

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
 * A store of the response cache: envelop's `Cache` cannot say what is left of an entry's TTL nor whether a write came
 * between a miss and its `set`. `write` stores only if no invalidation since the lookup's `Epoch` concerns it (checked
 * atomically); `stale` reads an answer past its TTL (kept that long, RESPONSE_CACHE_STALE_IF_ERROR_MS, in the indexes
 * too, so a write evicts it); `invalidate` resolves once no process can read what it evicted. Any may throw or reject.
 */
export interface GuardedStore<Epoch extends {}> {
  lookup(key: string): PromiseOrValue<Lookup<Epoch>>;
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

/** What a store keeps of an answer: its JSON as every answer is serialised (http/serialisation.ts), a hit's body. */
export const answerJson = (result: ExecutionResult): string => serialise(result);

/** The scope a key names (`responseCacheKey`: `<scope>:<hash>`), the caller the byte bounds charge; '' for none. */
export function scopeOfKey(key: string): string {
  const colon = key.indexOf(':');
  return colon === -1 ? '' : key.slice(0, colon);
}

/** Which byte bound an answer met as it was stored: the cache's whole budget, or its caller's share of it. */
export type ByteBound = 'total' | 'caller';

export interface ResponseCacheEvents {
  hit(): void;
  miss(): void;
  /** One invalidation: the entities asked for, and the answers evicted (when the store says). */
  invalidated(entities: number, evicted: number | undefined): void;
  /** An answer past its TTL served for a read that failed upstream (RESPONSE_CACHE_STALE_IF_ERROR_MS). */
  stale(): void;
  /** A store call that threw or rejected: a miss, not stored, or not evicted (a kept answer served until its TTL). */
  failed(call: 'lookup' | 'write' | 'invalidate'): void;
}

/** Where `get` puts a hit's expiry (its answer is a copy with this key in it). */
export const expiresAtKey = Symbol('response-cache.expires-at');

/** Misses remembered until their answer is stored, at most (one never stored stays until it expires). */
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
 * The cache the response-cache plugin is handed: fails open (never a failed request nor an unhandled rejection), and
 * stores an answer only if no invalidation came since its key's earliest miss, so a read begun before a write is
 * never stored after it (one begun after may lose its turn).
 */
export class ResponseCache<Epoch extends {} = object> implements Cache {
  readonly #pending: LRUCache<string, { readonly since: Epoch; readonly address: string | undefined }>;
  readonly #invalidating = new Set<Promise<unknown>>();
  readonly #alsoHeld = new WeakMap<ExecutionResult, readonly CacheEntityRecord[]>();

  constructor(
    private readonly store: GuardedStore<Epoch>,
    private readonly events: ResponseCacheEvents,
    answerWithinMs: number,
  ) {
    this.#pending = new LRUCache({ max: PENDING_MISSES, ttl: answerWithinMs, ttlAutopurge: false });
  }

  /** The answer kept under `key`; a miss remembers the store's epoch for `set`. */
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

  /** The answer kept under `key`, past its TTL too, for a read that failed; undefined when none or the store fails. */
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

  /** Types in `result` the plugin does not report (it reports objects with an id): invalidating one evicts it too. */
  alsoHolds(result: ExecutionResult, types: readonly CacheEntityRecord[]): void {
    this.#alsoHeld.set(result, types);
  }

  /** The plugin's, for a mutation's returned objects: not awaited but through `settled`. */
  invalidate(entities: Iterable<CacheEntityRecord>): void {
    void this.evict([...entities]);
  }

  /** Evicts every answer holding one of `entities`; resolves once done (or failed: fail open). */
  evict(entities: readonly CacheEntityRecord[]): Promise<void> {
    const done = Promise.resolve(
      guarded(
        () => this.store.invalidate(entities),
        (evicted) => this.events.invalidated(entities.length, typeof evicted === 'number' ? evicted : undefined),
        () => this.events.failed('invalidate'),
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
