import { performance } from 'node:perf_hooks';
import type { ExecutionResult } from 'graphql';
import { readStamped, type SharedRedis, stamped } from '../shared-state/shared-redis.js';
import { answerJson, type ByteBound, type CachedAnswer, type GuardedStore, type Lookup, scopeOfKey } from './cache.js';
import { EvictionJournal } from './eviction-journal.js';
import { indexNamesOf, invalidatedNameOf } from './index-names.js';
import { CLOCK_SKEW_MS, RedisAnswers } from './redis-answers.js';
import { redisBudget, weightOf } from './redis-budget.js';

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
  /**
   * How long past its TTL an answer is kept for `stale` (RESPONSE_CACHE_STALE_IF_ERROR_MS; 0: not at all). @default 0
   */
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
 * Runs `command` on Redis; when Redis cannot, counts a fallback and rejects. While `journal` owes
 * evictions it rejects too (Redis may well answer: not a fallback; the cache counts the failure).
 */
async function attemptOn<T>(redis: SharedRedis, journal: EvictionJournal, command: () => Promise<T>): Promise<T> {
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
 * The response cache in Redis (REDIS_URL), shared by every process and replica, on one node, a
 * Sentinel-watched master or a Cluster: an answer is found by any of them, and an invalidation
 * through any of them evicts it for all. Bounded: every key expires, one answer is at most
 * `maxEntryBytes`, what the answers weigh in Redis is charged to a budget kept in Redis, for the
 * whole cache and for each caller (an answer is not stored past either: redis-budget.ts), and an
 * invalidation evicts at most 500 answers per script (redis-answers.ts). Modelled on Apollo
 * Router's layout (one key per answer, index sets per entity scored by expiry); the epoch closes
 * the race of a read that started before a write storing its stale answer after the write's
 * invalidation, per entity (a write to one head does not stop answers about another from being
 * stored).
 *
 * While Redis is unreachable, refuses or times out, each call is counted as a `response_cache`
 * fallback and rejects, which the cache takes as a miss, an answer not kept, an eviction not made.
 * An eviction not made is kept and made again once Redis answers (`EvictionJournal`); until then
 * the store answers nothing, so nothing it should have evicted is served.
 */
export function createRedisResponseCache(options: RedisResponseCacheOptions): GuardedStore<RedisEpoch> {
  const {
    redis,
    prefix = DEFAULT_PREFIX,
    maxTtlMs,
    keepExpiredMs = 0,
    maxEntryBytes,
    raceWindowMs,
    budget,
    overBudget,
    holdBeforeLastStep,
  } = options;
  const answers = new RedisAnswers(redis, prefix, { raceWindowMs, holdBeforeLastStep });
  // Charged for as long as an answer is kept: its longest TTL and the time it is kept past it.
  const charge = redisBudget(redis, prefix, maxTtlMs + keepExpiredMs, budget);
  const journal = new EvictionJournal(
    async (work, pending) => (await answers.evict(work, pending, Date.now())).deleted,
  );
  redis.onBack(() => void journal.replay());
  redis.beforeClose(() => journal.settle());

  const attempt = <T>(command: () => Promise<T>) => attemptOn(redis, journal, command);

  /**
   * The answer kept under `key`, past its TTL too; none for a write's placeholder while its
   * entities are checked, or an answer an older build kept (its JSON alone).
   */
  async function read(key: string): Promise<CachedAnswer | undefined> {
    const kept = readStamped(await attempt(() => answers.get(key)));
    return kept === undefined
      ? undefined
      : { result: JSON.parse(kept.text) as ExecutionResult, expiresAt: kept.expiresAt, storedAt: kept.storedAt };
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
      if (Buffer.byteLength(json) > maxEntryBytes) return false;
      const now = Date.now();
      const value = stamped(now + ttl, now, json);
      const names = [...indexNamesOf(entities)];
      const weight = weightOf(answers.keyOf(key), value, names.length);
      return attempt(async () => {
        const charged = await charge(address === undefined ? [scopeOfKey(key)] : [scopeOfKey(key), address], weight);
        if (charged !== true) {
          overBudget?.(charged);
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
