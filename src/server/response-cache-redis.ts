import { performance } from 'node:perf_hooks';
import type { ExecutionResult } from 'graphql';
import { answerJson, type CacheEntityRecord, type GuardedStore, type Lookup } from './response-cache.js';
import type { SharedRedis } from './shared-state.js';

/**
 * Where the invalidations stood when a lookup missed: `write` stores the answer computed after it
 * only if no entity of that answer was invalidated since. Opaque to the cache.
 */
export interface RedisEpoch {
  /** The invalidation clock in Redis when the lookup ran. */
  readonly clock: number;
  /** When the lookup was sent (this process's monotonic clock). */
  readonly at: number;
}

export interface RedisResponseCacheOptions {
  readonly redis: SharedRedis;
  /** What every key of the cache starts with. @default 'gw:rc:' */
  readonly prefix?: string;
  /** The longest an answer is kept, whatever TTL it is stored with (the longest TTL configured). */
  readonly maxTtlMs: number;
  /** An answer longer than this (bytes of JSON) is not stored (RESPONSE_CACHE_MAX_ENTRY_BYTES). */
  readonly maxEntryBytes: number;
  /**
   * The longest a lookup's epoch stays good for `write` (the longest an operation runs: twice
   * OPERATION_TIMEOUT_MS, as the cache remembers a miss): Redis remembers what was invalidated for
   * twice as long.
   */
  readonly raceWindowMs: number;
}

const DEFAULT_PREFIX = 'gw:rc:';

/** Answers evicted per round trip of one invalidation: one script never holds Redis for long. */
const EVICTIONS_PER_CALL = 500;

/*
 * Keys, after the prefix: `a:<key>` an answer (JSON, with its TTL); `i:<Type>` and `i:<Type>:<id>`
 * the sorted sets of answer keys (scored by when each expires) that hold an entity of that type / that entity (a type name has no `:`),
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
 * ARGV: prefix, key, JSON, TTL in ms, the epoch's clock, then the answer's index names. Refused
 * (0) when one of them was invalidated after the epoch; otherwise the answer is stored and added
 * to each index, whose expiry only ever grows. An index is a sorted set scored by when each
 * answer expires: the answers that expired are dropped from it as another is added, so under
 * steady traffic (which keeps renewing its expiry) it holds only answers still kept.
 */
const storeScript = `local prefix, ttl, epoch = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
for i = 6, #ARGV do
  local version = redis.call('GET', prefix .. 'v:' .. ARGV[i])
  if version and tonumber(version) > epoch then return 0 end
end
redis.call('SET', prefix .. 'a:' .. ARGV[2], ARGV[3], 'PX', ttl)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
for i = 6, #ARGV do
  local index = prefix .. 'i:' .. ARGV[i]
  redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
  redis.call('ZADD', index, now + ttl, ARGV[2])
  if redis.call('PTTL', index) < ttl then redis.call('PEXPIRE', index, ttl) end
end
return 1`;

/**
 * ARGV: prefix, evictions allowed, '1' on the first call of an invalidation (then the clock
 * moves on, atomically with the first evictions), how long to remember it, then the index names.
 * Takes answer keys off the indexes and deletes those answers; returns how many answers it
 * deleted, then the indexes not yet empty.
 * Evictions come first: under maxmemory they still run (DEL is never refused), and free memory.
 * A clock that expired starts again from Redis's time in µs, above any value it had before
 * (fewer than a million invalidations a second), so an old epoch never passes for a new one.
 */
const invalidateScript = `local prefix, budget, first, remember = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', ARGV[4]
local evicted, left = 0, {}
for i = 5, #ARGV do
  local index = prefix .. 'i:' .. ARGV[i]
  if budget > 0 then
    local keys = redis.call('ZRANGE', index, 0, budget - 1)
    if #keys > 0 then redis.call('ZREM', index, unpack(keys)) end
    budget = budget - #keys
    for j = 1, #keys do keys[j] = prefix .. 'a:' .. keys[j] end
    if #keys > 0 then evicted = evicted + redis.call('DEL', unpack(keys)) end
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
return {evicted, unpack(left)}`;

interface ResponseCacheCommands {
  gwRcLookup(prefix: string, key: string): Promise<[clock: string, pttl?: number, answer?: string]>;
  gwRcStore(...args: string[]): Promise<number>;
  gwRcInvalidate(...args: string[]): Promise<[evicted: number, ...left: string[]]>;
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
 * before a write storing its stale answer after the write's invalidation, per entity (a write
 * to one head does not stop answers about another from being stored).
 *
 * While Redis is unreachable, refuses or times out, each call is counted as a `response_cache`
 * fallback and rejects, which the cache takes as a miss, an answer not kept, an eviction not made.
 */
export function createRedisResponseCache(options: RedisResponseCacheOptions): GuardedStore<RedisEpoch> {
  const { redis, prefix = DEFAULT_PREFIX, maxTtlMs, maxEntryBytes, raceWindowMs } = options;
  redis.client.defineCommand('gwRcLookup', { numberOfKeys: 0, lua: lookupScript });
  redis.client.defineCommand('gwRcStore', { numberOfKeys: 0, lua: storeScript });
  redis.client.defineCommand('gwRcInvalidate', { numberOfKeys: 0, lua: invalidateScript });
  const client = redis.client as unknown as ResponseCacheCommands;

  /** Runs `command` on Redis; when Redis cannot, counts a fallback and rejects. */
  async function attempt<T>(command: () => Promise<T>): Promise<T> {
    if (!redis.ready()) {
      redis.fellBack('response_cache');
      throw new Error('Redis is not connected');
    }
    try {
      return await command();
    } catch (error) {
      redis.fellBack('response_cache', error);
      throw error;
    }
  }

  return {
    async lookup(key): Promise<Lookup<RedisEpoch>> {
      const at = performance.now();
      const [clock, pttl, answer] = await attempt(() => client.gwRcLookup(prefix, key));
      if (answer === undefined || pttl === undefined) return { epoch: { clock: Number(clock), at } };
      return { answer: { result: JSON.parse(answer) as ExecutionResult, expiresAt: Date.now() + pttl } };
    },

    async write(key, result, entities, ttlMs, since) {
      const ttl = Math.floor(Math.min(ttlMs, maxTtlMs));
      if (!(ttl >= 1) || performance.now() - since.at > raceWindowMs) return false;
      const json = answerJson(result);
      if (Buffer.byteLength(json) > maxEntryBytes) return false;
      return (await attempt(() => client.gwRcStore(prefix, key, json, String(ttl), String(since.clock), ...indexNames(entities)))) === 1;
    },

    async invalidate(entities) {
      let names = invalidatedNames(entities);
      let evicted = 0;
      const remember = String(2 * raceWindowMs);
      for (let first = true; names.length > 0; first = false) {
        const [count, ...left] = await attempt(() => client.gwRcInvalidate(prefix, String(EVICTIONS_PER_CALL), first ? '1' : '0', remember, ...names));
        evicted += count;
        names = left;
      }
      return evicted;
    },
  };
}
