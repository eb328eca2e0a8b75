import { performance } from 'node:perf_hooks';
import type { ExecutionResult } from 'graphql';
import { readStamped, type SharedRedis, stamped } from '../shared-state/shared-redis.js';
import { answerJson, type ByteBound, type CachedAnswer, type GuardedStore, type Lookup, scopeOfKey } from './cache.js';
import { EvictionJournal } from './eviction-journal.js';
import { indexNamesOf, invalidatedNameOf } from './index-names.js';
import { CLOCK_SKEW_MS, RedisAnswers } from './redis-answers.js';
import { redisBudget, weightOf } from './redis-budget.js';

/** When a lookup missed: `write` stores the answer only if none of its entities was invalidated since. */
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
  /** How long past its TTL an answer is kept for `stale` (RESPONSE_CACHE_STALE_IF_ERROR_MS; 0: not). @default 0 */
  readonly keepExpiredMs?: number;
  /** An answer longer than this (bytes of JSON) is not stored (RESPONSE_CACHE_MAX_ENTRY_BYTES). */
  readonly maxEntryBytes: number;
  /** Redis memory all answers may take (RESPONSE_CACHE_MAX_BYTES), and one caller's (RESPONSE_CACHE_CALLER_SHARE). */
  readonly budget: { readonly maxBytes: number; readonly callerBytes: number };
  /** Called with the bound an answer met when it was not stored for it. */
  readonly overBudget?: (bound: ByteBound) => void;
  /** How long a lookup's epoch is good: twice OPERATION_TIMEOUT_MS, as a miss is remembered. */
  readonly raceWindowMs: number;
  /** Tests only: awaited by a write on a Cluster between its entities' checks and its last step, to hold it there. */
  readonly holdBeforeLastStep?: () => Promise<void>;
}

/**
 * The response cache in Redis (REDIS_URL), shared by every process and replica (one node, Sentinel or Cluster).
 * Bounded: every key expires, answers are charged to a budget in Redis (redis-budget.ts), an invalidation evicts 500
 * answers a script (redis-answers.ts). The epoch closes, per entity, the race of a read begun before a write storing
 * its stale answer after the write's invalidation. While Redis fails, each call counts a `response_cache` fallback
 * and rejects; an eviction not made is owed (`EvictionJournal`), and until it is made the store answers nothing.
 */
export function createRedisResponseCache(options: RedisResponseCacheOptions): GuardedStore<RedisEpoch> {
  const { redis, prefix = 'gw:rc:', maxTtlMs, keepExpiredMs = 0, raceWindowMs } = options;
  const answers = new RedisAnswers(redis, prefix, options);
  // Charged for as long as an answer is kept: its longest TTL and the time it is kept past it.
  const charge = redisBudget(redis, prefix, maxTtlMs + keepExpiredMs, options.budget);
  const journal = new EvictionJournal(
    async (work, pending) => (await answers.evict(work, pending, Date.now())).deleted,
  );
  redis.onBack(() => void journal.replay());
  redis.beforeClose(() => journal.settle());

  /** Runs `command` on Redis, a fallback counted when it cannot; while evictions are owed, rejects (not a fallback). */
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

  /** The answer under `key` with its JSON as kept, past its TTL too; none for a placeholder or an older build's. */
  async function read(key: string): Promise<CachedAnswer | undefined> {
    const kept = readStamped(await attempt(() => answers.get(key)));
    return kept === undefined
      ? undefined
      : {
          result: JSON.parse(kept.text) as ExecutionResult,
          json: kept.text,
          expiresAt: kept.expiresAt,
          storedAt: kept.storedAt,
        };
  }

  return {
    async lookup(key): Promise<Lookup<RedisEpoch>> {
      const epoch = { since: Date.now(), at: performance.now() };
      const answer = await read(key);
      // Past its TTL, an answer is kept for `stale` only.
      return answer === undefined || answer.expiresAt <= Date.now() ? { epoch } : { answer };
    },
    stale: read,
    async write(key, result, entities, ttlMs, since, address) {
      const ttl = Math.floor(Math.min(ttlMs, maxTtlMs));
      if (!(ttl >= 1) || performance.now() - since.at > raceWindowMs) return false;
      const json = answerJson(result);
      if (Buffer.byteLength(json) > options.maxEntryBytes) return false;
      const now = Date.now();
      const value = stamped(now + ttl, now, json);
      const names = [...indexNamesOf(entities)];
      const weight = weightOf(answers.keyOf(key), value, names.length);
      return attempt(async () => {
        const charged = await charge(address === undefined ? [scopeOfKey(key)] : [scopeOfKey(key), address], weight);
        if (charged !== true) {
          options.overBudget?.(charged);
          return false;
        }
        return answers.store(key, value, ttl + keepExpiredMs, names, since.since - CLOCK_SKEW_MS);
      });
    },
    async invalidate(entities) {
      const names = [...new Set(Array.from(entities, invalidatedNameOf))];
      const at = Date.now();
      const pending = new Set<string>();
      try {
        const { deleted, held } = await attempt(() => answers.evict({ names, answers: [] }, pending, at));
        journal.made({ names, answers: deleted });
        return held;
      } catch (error) {
        journal.owe({ names, answers: [...pending] });
        throw error;
      }
    },
  };
}
