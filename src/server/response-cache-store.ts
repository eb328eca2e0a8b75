import { performance } from 'node:perf_hooks';
import type { Cache } from '@graphql-yoga/plugin-response-cache';
import type { ExecutionResult } from 'graphql';
import type { SharedRedis } from './shared-state.js';

/** An entity a result holds (`{typename, id}`), or a whole type (`{typename}`), as the plugin collects them. */
export type CacheEntityRecord = Parameters<Cache['invalidate']>[0] extends Iterable<infer Entity> ? Entity : never;

/** A cached answer and how long Redis keeps it still (for `Cache-Control: max-age`). */
export interface CachedAnswer {
  readonly result: ExecutionResult;
  readonly remainingMs: number;
}

/**
 * Where the invalidations stood when a lookup missed: `setIfEpoch` stores the answer computed
 * after it only if no entity of that answer was invalidated since. Opaque to callers.
 */
export interface CacheEpoch {
  /** The invalidation clock in Redis when the lookup ran. */
  readonly clock: number;
  /** When the lookup was sent (this process's monotonic clock). */
  readonly at: number;
}

/** A lookup's outcome: the answer, or (a miss) the epoch to store the fresh one with. */
export type CacheLookup = { readonly answer: CachedAnswer; readonly epoch?: undefined } | { readonly answer?: undefined; readonly epoch: CacheEpoch };

/**
 * The response cache plugins' `Cache` (what `useResponseCache` calls) over Redis, plus what the
 * gateway's own wiring needs. Nothing rejects: while Redis is unreachable, refuses or times out, a lookup is a
 * miss and a write does nothing, each counted as a `response_cache` fallback.
 */
export interface ResponseCacheStore extends Cache {
  get(key: string): Promise<ExecutionResult | undefined>;
  /** Stores unconditionally (the plugin's own path, which has no epoch). */
  set(key: string, result: ExecutionResult, entities: Iterable<CacheEntityRecord>, ttlMs: number): Promise<void>;
  /** `tryInvalidate` for the plugin, which ignores the outcome. */
  invalidate(entities: Iterable<CacheEntityRecord>): Promise<void>;
  /**
   * Evicts every answer, of every caller and replica, that holds one of `entities` (`{typename, id}`:
   * that entity; `{typename}`: every entity of the type). Resolves true once done; false when Redis
   * could not be reached or refused, so answers holding them may survive until their TTL.
   */
  tryInvalidate(entities: Iterable<CacheEntityRecord>): Promise<boolean>;
  /** The answer and its remaining TTL, or (a miss) the epoch for `setIfEpoch`; undefined when Redis did not answer. One round trip. */
  lookup(key: string): Promise<CacheLookup | undefined>;
  getWithTtl(key: string): Promise<CachedAnswer | undefined>;
  /** The epoch alone (`lookup` gives it with a miss at no extra cost); undefined when Redis did not answer. */
  epoch(): Promise<CacheEpoch | undefined>;
  /**
   * Stores the answer only if none of its entities (nor their types) was invalidated after `epoch`
   * was read, and no more than `raceWindowMs` ago; atomic with the check. False when not stored.
   */
  setIfEpoch(key: string, result: ExecutionResult, entities: Iterable<CacheEntityRecord>, ttlMs: number, epoch: CacheEpoch | undefined): Promise<boolean>;
}

export interface RedisResponseCacheOptions {
  readonly redis: SharedRedis;
  /** What every key of the cache starts with. @default 'gw:rc:' */
  readonly prefix?: string;
  /** The longest an answer is kept, whatever TTL it is stored with (the plugin's default TTL is Infinity). */
  readonly maxTtlMs: number;
  /** An answer longer than this (bytes of JSON) is not stored. */
  readonly maxEntryBytes: number;
  /**
   * The longest a lookup's epoch stays good for `setIfEpoch` (the longest an operation runs, e.g.
   * OPERATION_TIMEOUT_MS): Redis remembers what was invalidated for twice as long.
   */
  readonly raceWindowMs: number;
}

const DEFAULT_PREFIX = 'gw:rc:';

/** Answers evicted per round trip of one invalidation: one script never holds Redis for long. */
const EVICTIONS_PER_CALL = 500;

/*
 * Keys, after the prefix: `a:<key>` an answer (JSON, with its TTL); `i:<Type>` and `i:<Type>:<id>`
 * the sets of answer keys that hold an entity of that type / that entity (a type name has no `:`),
 * each expiring with the longest answer it indexes; `clock` the invalidation counter and
 * `v:<Type>` / `v:<Type>:<id>` the clock when that entity was last invalidated, kept as long as a
 * lookup's epoch is good. Keys are built in the scripts (one Redis, not a cluster), as the APQ
 * store does; nothing is ever listed by pattern.
 */

/** ARGV: prefix, key. The answer, its PTTL and the clock (0 before any invalidation). */
const lookupScript = `local answerKey = ARGV[1] .. 'a:' .. ARGV[2]
local clock = redis.call('GET', ARGV[1] .. 'clock') or '0'
local answer = redis.call('GET', answerKey)
if answer then return {clock, redis.call('PTTL', answerKey), answer} end
return {clock}`;

/**
 * ARGV: prefix, key, JSON, TTL in ms, the epoch's clock ('' to store unconditionally), then the
 * answer's index names. Refused (0) when one of them was invalidated after the epoch; otherwise
 * the answer is stored and added to each index, whose expiry only ever grows.
 */
const storeScript = `local prefix, ttl = ARGV[1], tonumber(ARGV[4])
if ARGV[5] ~= '' then
  local epoch = tonumber(ARGV[5])
  for i = 6, #ARGV do
    local version = redis.call('GET', prefix .. 'v:' .. ARGV[i])
    if version and tonumber(version) > epoch then return 0 end
  end
end
redis.call('SET', prefix .. 'a:' .. ARGV[2], ARGV[3], 'PX', ttl)
for i = 6, #ARGV do
  local index = prefix .. 'i:' .. ARGV[i]
  redis.call('SADD', index, ARGV[2])
  if redis.call('PTTL', index) < ttl then redis.call('PEXPIRE', index, ttl) end
end
return 1`;

/**
 * ARGV: prefix, evictions allowed, '1' on the first call of an invalidation (then the clock
 * moves on, atomically with the first evictions), how long to remember it, then the index names.
 * Pops answer keys from the indexes and deletes those answers; returns the indexes not yet empty.
 * Evictions come first: under maxmemory they still run (DEL is never refused), and free memory.
 * A clock that expired starts again from Redis's time in µs, above any value it had before
 * (fewer than a million invalidations a second), so an old epoch never passes for a new one.
 */
const invalidateScript = `local prefix, budget, first, remember = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', ARGV[4]
local left = {}
for i = 5, #ARGV do
  local index = prefix .. 'i:' .. ARGV[i]
  if budget > 0 then
    local keys = redis.call('SPOP', index, budget)
    budget = budget - #keys
    for j = 1, #keys do keys[j] = prefix .. 'a:' .. keys[j] end
    if #keys > 0 then redis.call('DEL', unpack(keys)) end
  end
  if redis.call('EXISTS', index) == 1 then left[#left + 1] = ARGV[i] end
end
if first then
  local clockKey = prefix .. 'clock'
  if redis.call('EXISTS', clockKey) == 0 then
    local now = redis.call('TIME')
    redis.call('SET', clockKey, now[1] .. string.format('%06d', tonumber(now[2])))
  end
  redis.call('INCR', clockKey)
  redis.call('PEXPIRE', clockKey, remember)
  local clock = redis.call('GET', clockKey)
  for i = 5, #ARGV do redis.call('SET', prefix .. 'v:' .. ARGV[i], clock, 'PX', remember) end
end
return left`;

interface ResponseCacheCommands {
  gwRcLookup(prefix: string, key: string): Promise<[clock: string, pttl?: number, answer?: string]>;
  gwRcStore(...args: string[]): Promise<number>;
  gwRcInvalidate(...args: string[]): Promise<string[]>;
}

/** The index names of an answer's entities: each entity's type, and the entity itself when it has an id. */
function indexNames(entities: Iterable<CacheEntityRecord>): string[] {
  const names = new Set<string>();
  for (const { typename, id } of entities) {
    names.add(typename);
    if (id != null) names.add(`${typename}:${id}`);
  }
  return [...names];
}

/** The index names an invalidation empties: the entity's own, or its type's when it names no id. */
function invalidatedNames(entities: Iterable<CacheEntityRecord>): string[] {
  return [...new Set(Array.from(entities, ({ typename, id }) => (id == null ? typename : `${typename}:${id}`)))];
}

/**
 * The response cache in Redis (REDIS_URL), shared by every process and replica: an answer is
 * found by any of them, and an invalidation through any of them evicts it for all. Bounded:
 * every key expires, one answer is at most `maxEntryBytes`, and an invalidation evicts at most
 * 500 answers per script (a popular entity is evicted in several round trips, never by a
 * pattern scan). Modelled on @envelop/response-cache-redis, whose index sets never expire and
 * whose type-wide invalidation runs KEYS; the epoch closes the race of a read that started
 * before a write storing its stale answer after the write's invalidation.
 */
export function createRedisResponseCache(options: RedisResponseCacheOptions): ResponseCacheStore {
  const { redis, prefix = DEFAULT_PREFIX, maxTtlMs, maxEntryBytes, raceWindowMs } = options;
  redis.client.defineCommand('gwRcLookup', { numberOfKeys: 0, lua: lookupScript });
  redis.client.defineCommand('gwRcStore', { numberOfKeys: 0, lua: storeScript });
  redis.client.defineCommand('gwRcInvalidate', { numberOfKeys: 0, lua: invalidateScript });
  const client = redis.client as unknown as ResponseCacheCommands;

  /** Runs `command` on Redis, or counts a fallback and gives `fallback` (never rejects). */
  async function attempt<T, F>(command: () => Promise<T>, fallback: F): Promise<T | F> {
    if (!redis.ready()) {
      redis.fellBack('response_cache');
      return fallback;
    }
    try {
      return await command();
    } catch (error) {
      redis.fellBack('response_cache', error);
      return fallback;
    }
  }

  async function lookup(key: string): Promise<CacheLookup | undefined> {
    const at = performance.now();
    const reply = await attempt(() => client.gwRcLookup(prefix, key), undefined);
    if (reply === undefined) return undefined;
    const [clock, pttl, answer] = reply;
    if (answer === undefined || pttl === undefined) return { epoch: { clock: Number(clock), at } };
    return { answer: { result: JSON.parse(answer) as ExecutionResult, remainingMs: pttl } };
  }

  async function store(key: string, result: ExecutionResult, entities: Iterable<CacheEntityRecord>, ttlMs: number, epoch: string): Promise<boolean> {
    const ttl = Math.floor(Math.min(ttlMs, maxTtlMs));
    if (!(ttl >= 1)) return false;
    const json = JSON.stringify(result);
    if (Buffer.byteLength(json) > maxEntryBytes) return false;
    return (await attempt(() => client.gwRcStore(prefix, key, json, String(ttl), epoch, ...indexNames(entities)), 0)) === 1;
  }

  async function tryInvalidate(entities: Iterable<CacheEntityRecord>): Promise<boolean> {
    let names = invalidatedNames(entities);
    const remember = String(2 * raceWindowMs);
    for (let first = true; names.length > 0; first = false) {
      const left = await attempt(() => client.gwRcInvalidate(prefix, String(EVICTIONS_PER_CALL), first ? '1' : '0', remember, ...names), undefined);
      if (left === undefined) return false;
      names = left;
    }
    return true;
  }

  return {
    lookup,
    async get(key) {
      return (await lookup(key))?.answer?.result;
    },
    async getWithTtl(key) {
      return (await lookup(key))?.answer;
    },
    async epoch() {
      const at = performance.now();
      const clock = await attempt(() => redis.client.get(prefix + 'clock'), undefined);
      return clock === undefined ? undefined : { clock: Number(clock ?? 0), at };
    },
    async set(key, result, entities, ttlMs) {
      await store(key, result, entities, ttlMs, '');
    },
    async setIfEpoch(key, result, entities, ttlMs, epoch) {
      if (epoch === undefined || performance.now() - epoch.at > raceWindowMs) return false;
      return store(key, result, entities, ttlMs, String(epoch.clock));
    },
    async invalidate(entities) {
      await tryInvalidate(entities);
    },
    tryInvalidate,
  };
}
