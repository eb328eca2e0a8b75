import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { ExecutionResult } from 'graphql';
import { answerJson, scopeOfKey, type ByteBound, type CacheEntityRecord, type CachedAnswer, type GuardedStore, type Lookup } from './cache.js';
import { EvictionJournal, type Evictions } from './eviction-journal.js';
import { indexNamesOf, invalidatedNameOf } from './index-names.js';
import { readStamped, stamped, type SharedRedis } from '../shared-state/shared-redis.js';

/**
 * When a lookup missed: `write` stores the answer computed after it only if no entity of that
 * answer was invalidated since. Opaque to the cache.
 */
export interface RedisEpoch {
  /** When the lookup was sent, on this process's wall clock (ms): invalidations are dated on it too. */
  readonly since: number;
  /** The same moment on this process's monotonic clock, for the race window. */
  readonly at: number;
}

export interface RedisResponseCacheOptions {
  readonly redis: SharedRedis;
  /** What every key of the cache starts with. @default 'gw:rc:' */
  readonly prefix?: string;
  /** The longest an answer is kept, whatever TTL it is stored with (the longest TTL configured). */
  readonly maxTtlMs: number;
  /** How long past its TTL an answer is kept for `stale` (RESPONSE_CACHE_STALE_IF_ERROR_MS; 0: not at all). @default 0 */
  readonly keepExpiredMs?: number;
  /** An answer longer than this (bytes of JSON) is not stored (RESPONSE_CACHE_MAX_ENTRY_BYTES). */
  readonly maxEntryBytes: number;
  /**
   * What the cache's keys may take of Redis's memory, estimated, all replicas together
   * (RESPONSE_CACHE_MAX_BYTES), and what one caller's answers may take of it (`scopeOfKey`;
   * RESPONSE_CACHE_CALLER_SHARE of it): an answer that would go past either is not stored.
   */
  readonly budget: { readonly maxBytes: number; readonly callerBytes: number };
  /** Called with the bound an answer met when it was not stored for it. */
  readonly overBudget?: (bound: ByteBound) => void;
  /**
   * The longest a lookup's epoch stays good for `write` (the longest an operation runs: twice
   * OPERATION_TIMEOUT_MS, as the cache remembers a miss): Redis remembers what was invalidated for
   * twice as long.
   */
  readonly raceWindowMs: number;
  /** Tests only: awaited by a write on a Cluster between its entities' checks and its last step, to hold it there. */
  readonly holdBeforeLastStep?: () => Promise<void>;
}

const DEFAULT_PREFIX = 'gw:rc:';

/**
 * What an answer weighs in Redis, beyond its key's bytes: its value, rounded up to the allocator's
 * size class (up to a quarter more), the key's own entry and expiry, and each index it is added to
 * counted as an index of its own (a sorted set key: some 1,050 bytes; a member of an index others
 * share costs a fifth of it). Measured with INFO's used_memory, answers of 300 bytes to 750 kB
 * each with indexes of their own: 73 to 99 % of this weight (docs/response-cache.md#redis-memory).
 */
const BYTES_PER_VALUE_BYTE = 1.25;
const BYTES_PER_ANSWER = 500;
const BYTES_PER_INDEX = 1_100;

/**
 * The budget's time buckets per longest TTL: what was stored in the last TTL (and a clock skew) is
 * the most Redis can hold, so the bytes charged to the buckets that span it bound what is kept.
 */
const BUDGET_BUCKETS = 8;

/** Answers evicted per round trip of one invalidation: one script never holds Redis for long. */
const EVICTIONS_PER_CALL = 500;

/**
 * How far apart two replicas' clocks may be: an answer whose lookup was less than this after an
 * invalidation of one of its entities is not stored (a lost turn, not a stale answer).
 */
export const CLOCK_SKEW_MS = 1_000;

/*
 * Keys, after the prefix: `a:<key>` an answer (`<expires at, ms>:<JSON>`, with its TTL; a write's
 * placeholder while it waits for its entities' check on a Cluster, see `write`); `{<name>}:i` the sorted set of the answer
 * keys that hold the entity `<name>` (`Type:id`, or `Type` for every answer holding one of that
 * type), scored by when each expires, and expiring with the longest of them; `{<name>}:v` when
 * that entity was last invalidated, kept as long as a lookup's epoch is good; `{budget}:all:<n>` and
 * `{budget}:caller:<scope>:<n>` the bytes charged in the budget's bucket `n` (`charge`), all in one
 * slot (a write's one extra script; reads never touch them). An entity's two keys
 * share its hash tag, so they sit in one slot of a Cluster and one script may touch both; answers
 * and entities spread over every slot (Apollo Router's layout). Every key a script touches is
 * one of its KEYS, and nothing is ever listed by pattern.
 */

/**
 * KEYS: the answer's key when ARGV[1] is '1', then the index and version of each entity.
 * ARGV: whether the answer is written here, the answer's key as the indexes name it, its value,
 * its TTL in ms, the epoch's time less the clock skew, now (ms).
 * Refused (0) when one of the entities was invalidated at or after that time; otherwise the
 * answer (if here) is stored and added to each index, whose expiry only ever grows. An index
 * drops the answers that expired as another is added, so under steady traffic (which keeps
 * renewing its expiry) it holds only answers still kept.
 */
const storeScript = `local own, member, value, ttl, notBefore, now = ARGV[1] == '1', ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local first = own and 2 or 1
for i = first + 1, #KEYS, 2 do
  local version = redis.call('GET', KEYS[i])
  if version and tonumber(version) >= notBefore then return 0 end
end
if own then redis.call('SET', KEYS[1], value, 'PX', ttl) end
for i = first, #KEYS, 2 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  redis.call('ZADD', KEYS[i], now + ttl, member)
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 1`;

/**
 * KEYS: the index and version of each entity. ARGV: evictions allowed, the invalidation's time
 * (ms; '' after the first call of an invalidation), how long to remember it.
 * Takes up to that many answer keys off the indexes and returns them, with the positions (1-based
 * pairs) of the indexes not yet empty; the caller deletes those answers (and owes them, by key,
 * if it cannot: the indexes no longer name them). The versions are set
 * last, and never fail the script: under `maxmemory` a refused SET would lose the answer keys
 * already taken off (the evictions themselves free memory and are never refused); a Redis that
 * refuses writes stores no answer either.
 */
const invalidateScript = `local budget, at, remember = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local taken, left = {}, {}
for i = 1, #KEYS, 2 do
  if budget > 0 then
    local keys = redis.call('ZRANGE', KEYS[i], 0, budget - 1)
    if #keys > 0 then redis.call('ZREM', KEYS[i], unpack(keys)) end
    budget = budget - #keys
    for j = 1, #keys do taken[#taken + 1] = keys[j] end
  end
  if redis.call('EXISTS', KEYS[i]) == 1 then left[#left + 1] = i end
end
if at ~= '' then
  for i = 2, #KEYS, 2 do
    local version = redis.call('GET', KEYS[i])
    if not version or tonumber(version) < tonumber(at) then redis.pcall('SET', KEYS[i], at, 'PX', remember) end
  end
end
return {left, taken}`;

/** The scripts take their number of keys first (ioredis's form for a script whose keys vary), then the keys, then ARGV. */
/**
 * KEYS: an answer's key. ARGV: a write's placeholder, the answer's value ('' to give up), its TTL
 * in ms. Sets the answer, or deletes the placeholder, only if the key still holds this write's
 * placeholder: 1 when it did.
 */
const settleScript = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`;

/**
 * KEYS: the whole cache's budget buckets, then the caller's, newest first, as many each. ARGV: an
 * answer's weight, the budget and the caller's share (bytes), how long a bucket is kept (ms).
 * Refused (0, or -1 for the caller's share) when the buckets and the weight go past a bound;
 * otherwise charged to the newest bucket of both: 1.
 */
const chargeScript = `local weight, budget, share, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = #KEYS / 2
local function spent(first)
  local total = 0
  for _, bytes in ipairs(redis.call('MGET', unpack(KEYS, first, first + n - 1))) do
    if bytes then total = total + tonumber(bytes) end
  end
  return total
end
if spent(1) + weight > budget then return 0 end
if spent(n + 1) + weight > share then return -1 end
for _, i in ipairs({1, n + 1}) do
  redis.call('INCRBY', KEYS[i], weight)
  redis.call('PEXPIRE', KEYS[i], keep)
end
return 1`;

interface ResponseCacheCommands {
  gwRcCharge(...keysThenArgs: (number | string)[]): Promise<number>;
  gwRcStore(...keysThenArgs: (number | string)[]): Promise<number>;
  gwRcInvalidate(...keysThenArgs: (number | string)[]): Promise<[left: number[], taken: string[]]>;
  gwRcSettle(key: string, token: string, value: string, ttl: number): Promise<number>;
  get(key: string): Promise<string | null>;
  set(key: string, value: string, px: 'PX', ttl: number): Promise<'OK' | null>;
  unlink(...keys: string[]): Promise<number>;
}

/**
 * The response cache in Redis (REDIS_URL), shared by every process and replica, on one node, a
 * Sentinel-watched master or a Cluster: an answer is found by any of them, and an invalidation
 * through any of them evicts it for all. Bounded: every key expires, one answer is at most
 * `maxEntryBytes`, what the answers weigh in Redis is charged to a budget kept in Redis, for the
 * whole cache and for each caller (an answer is not stored past either: `charge`), and an
 * invalidation evicts at most 500 answers per script (a popular entity is
 * evicted in several round trips, never by a pattern scan). Modelled on Apollo Router's layout
 * (one key per answer, index sets per entity scored by expiry); the epoch closes the race of a
 * read that started before a write storing its stale answer after the write's invalidation, per
 * entity (a write to one head does not stop answers about another from being stored).
 *
 * A write's check and its answer are one script when they share a slot (always, but on a
 * Cluster). On a Cluster they cannot: the answer's key first gets this write's own placeholder (a
 * miss to readers), each slot of its entities is checked and indexed, and only then is its JSON
 * set, if the key still holds that placeholder (an invalidation that took it off an index in
 * between deleted it; a later write may have put its own there).
 *
 * While Redis is unreachable, refuses or times out, each call is counted as a `response_cache`
 * fallback and rejects, which the cache takes as a miss, an answer not kept, an eviction not made.
 * An eviction not made is kept and made again once Redis answers (`EvictionJournal`); until then
 * the store answers nothing, so nothing it should have evicted is served.
 */
export function createRedisResponseCache(options: RedisResponseCacheOptions): GuardedStore<RedisEpoch> {
  const { redis, prefix = DEFAULT_PREFIX, maxTtlMs, keepExpiredMs = 0, maxEntryBytes, raceWindowMs, budget, overBudget, holdBeforeLastStep } = options;
  redis.client.defineCommand('gwRcStore', { lua: storeScript });
  redis.client.defineCommand('gwRcCharge', { lua: chargeScript });
  redis.client.defineCommand('gwRcInvalidate', { lua: invalidateScript });
  redis.client.defineCommand('gwRcSettle', { numberOfKeys: 1, lua: settleScript });
  const client = redis.client as unknown as ResponseCacheCommands;
  const answerKey = (key: string) => `${prefix}a:${key}`;
  const entityKeys = (name: string) => [`${prefix}{${name}}:i`, `${prefix}{${name}}:v`];

  /**
   * Runs `command` on Redis; when Redis cannot, counts a fallback and rejects. While evictions
   * are owed it rejects too (Redis may well answer: not a fallback; the cache counts the failure).
   */
  async function attempt<T>(command: () => Promise<T>): Promise<T> {
    if (journal.owing()) throw new Error('Evictions are owed');
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

  /**
   * Deletes the answers `work.answers` names, then every answer the entities `work.names` index,
   * in rounds of 500 per slot; the answer keys a round took off an index stay in `pending` until
   * deleted. Resolves with the answer keys deleted, and how many of them Redis still held.
   */
  async function evict(work: Evictions, pending: Set<string>, at: number): Promise<{ deleted: string[]; held: number }> {
    const deleted: string[] = [];
    let held = 0;
    const unlink = async (keys: readonly string[]) => {
      for (const key of keys) pending.add(key);
      const counts = await Promise.all(redis.bySlot(keys, answerKey).map((group) => client.unlink(...group.map(answerKey))));
      for (const key of keys) pending.delete(key);
      deleted.push(...keys);
      held += counts.reduce((sum, count) => sum + count, 0);
    };
    await unlink(work.answers);
    const remember = 2 * raceWindowMs + CLOCK_SKEW_MS;
    const rounds = redis.bySlot(work.names, (name) => entityKeys(name)[0]!).map(async (group) => {
      for (let first = true, left = group; left.length > 0; first = false) {
        const keys = left.flatMap(entityKeys);
        const [open, taken] = await client.gwRcInvalidate(keys.length, ...keys, EVICTIONS_PER_CALL, first ? at : '', remember);
        await unlink(taken);
        left = open.map((position) => left[(position - 1) / 2]!);
      }
    });
    await Promise.all(rounds);
    return { deleted, held };
  }

  // The budget's buckets: what was charged in the last longest TTL (and the time an answer is kept past it), and a clock skew, is all Redis may still hold.
  const heldMs = maxTtlMs + keepExpiredMs;
  const bucketMs = Math.max(1_000, Math.ceil(heldMs / BUDGET_BUCKETS));
  const bucketsCounted = Math.ceil((heldMs + CLOCK_SKEW_MS) / bucketMs) + 1;
  /** Charges `weight` bytes to the whole cache and to `scope`: 1, or the bound it would go past. */
  async function charge(scope: string, weight: number): Promise<true | ByteBound> {
    const newest = Math.floor(Date.now() / bucketMs);
    const buckets = (owner: string) => Array.from({ length: bucketsCounted }, (_, i) => `${prefix}{budget}:${owner}:${newest - i}`);
    const keys = [...buckets('all'), ...buckets(`caller:${scope}`)];
    const charged = await client.gwRcCharge(keys.length, ...keys, weight, budget.maxBytes, budget.callerBytes, bucketsCounted * bucketMs + CLOCK_SKEW_MS);
    return charged === 1 ? true : charged === 0 ? 'total' : 'caller';
  }

  const journal = new EvictionJournal(async (work, pending) => (await evict(work, pending, Date.now())).deleted);
  redis.onBack(() => void journal.replay());
  redis.beforeClose(() => journal.settle());

  /** Stores `value` under `key` for `ttl` ms (its TTL and the time it is kept past it), indexed by `names`, unless one of them was invalidated since `notBefore`. */
  async function store(key: string, value: string, ttl: number, names: readonly string[], notBefore: number): Promise<boolean> {
    const now = Date.now();
    const check = (group: readonly string[], own: boolean) => {
      const keys = [...(own ? [answerKey(key)] : []), ...group.flatMap(entityKeys)];
      return client.gwRcStore(keys.length, ...keys, own ? '1' : '0', key, own ? value : '', ttl, notBefore, now);
    };
    const groups = redis.bySlot([answerKey(key), ...names.flatMap(entityKeys)], (name) => name);
    if (groups.length === 1) return (await check(names, true)) === 1;
    // This write's own placeholder: its last step sets the answer only over it, never over another
    // write's placeholder or answer (an invalidation may delete it, and a fresher write put its own).
    const token = randomUUID();
    await client.set(answerKey(key), token, 'PX', ttl);
    const settle = (settled: string) => client.gwRcSettle(answerKey(key), token, settled, ttl);
    const checked = await Promise.all(redis.bySlot(names, (name) => entityKeys(name)[0]!).map((group) => check(group, false))).catch(async (error: unknown) => {
      await settle('').catch(() => undefined);
      throw error;
    });
    await holdBeforeLastStep?.();
    const allowed = checked.every((stored) => stored === 1);
    const settled = await settle(allowed ? value : '');
    return allowed && settled === 1;
  }

  /**
   * The answer kept under `key`, past its TTL too; none for a write's placeholder while its
   * entities are checked, or an answer an older build kept (its JSON alone).
   */
  async function read(key: string): Promise<CachedAnswer | undefined> {
    const kept = readStamped(await attempt(() => client.get(answerKey(key))));
    return kept === undefined ? undefined : { result: JSON.parse(kept.text) as ExecutionResult, expiresAt: kept.expiresAt };
  }

  return {
    async lookup(key): Promise<Lookup<RedisEpoch>> {
      const epoch = { since: Date.now(), at: performance.now() };
      const answer = await read(key);
      // Past its TTL, an answer is kept for `stale` only.
      return answer === undefined || answer.expiresAt <= Date.now() ? { epoch } : { answer };
    },

    stale: read,

    async write(key, result, entities, ttlMs, since) {
      const ttl = Math.floor(Math.min(ttlMs, maxTtlMs));
      if (!(ttl >= 1) || performance.now() - since.at > raceWindowMs) return false;
      const json = answerJson(result);
      if (Buffer.byteLength(json) > maxEntryBytes) return false;
      const value = stamped(Date.now() + ttl, json);
      const names = [...indexNamesOf(entities)];
      const weight = Math.ceil(Buffer.byteLength(answerKey(key)) + BYTES_PER_VALUE_BYTE * Buffer.byteLength(value) + BYTES_PER_ANSWER + names.length * BYTES_PER_INDEX);
      return attempt(async () => {
        const charged = await charge(scopeOfKey(key), weight);
        if (charged !== true) {
          overBudget?.(charged);
          return false;
        }
        return store(key, value, ttl + keepExpiredMs, names, since.since - CLOCK_SKEW_MS);
      });
    },

    async invalidate(entities) {
      const names = [...new Set(Array.from(entities, invalidatedNameOf))];
      const at = Date.now();
      const pending = new Set<string>();
      try {
        const { deleted, held } = await attempt(() => evict({ names, answers: [] }, pending, at));
        journal.made({ names, answers: deleted });
        return held;
      } catch (error) {
        journal.owe({ names, answers: [...pending] });
        throw error;
      }
    },
  };
}
