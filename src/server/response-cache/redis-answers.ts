import { randomUUID } from 'node:crypto';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import type { Evictions } from './eviction-journal.js';

/**
 * How far apart two replicas' clocks may be: an answer whose lookup was less than this after an
 * invalidation of one of its entities is not stored (a lost turn, not a stale answer).
 */
export const CLOCK_SKEW_MS = 1_000;

/** Answers evicted per round trip of one invalidation: one script never holds Redis for long. */
const EVICTIONS_PER_CALL = 500;

/*
 * Keys, after the prefix: `a:<key>` an answer (`<expires at, ms>:<JSON>`, with its TTL; a write's
 * placeholder while it waits for its entities' check on a Cluster, see `store`); `{<name>}:i` the
 * sorted set of the answer keys that hold the entity `<name>` (`Type:id`, or `Type` for every
 * answer holding one of that type), scored by when each expires, and expiring with the longest of
 * them; `{<name>}:v` when that entity was last invalidated, kept as long as a lookup's epoch is
 * good. An entity's two keys share its hash tag, so they sit in one slot of a Cluster and one
 * script may touch both; answers and entities spread over every slot (Apollo Router's layout).
 * Every key a script touches is one of its KEYS, and nothing is ever listed by pattern. The
 * budget's keys are redis-budget.ts's.
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

/**
 * KEYS: an answer's key. ARGV: a write's placeholder, the answer's value ('' to give up), its TTL
 * in ms. Sets the answer, or deletes the placeholder, only if the key still holds this write's
 * placeholder: 1 when it did.
 */
const settleScript = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`;

/**
 * The scripts take their number of keys first (ioredis's form for a script whose keys vary), then the keys, then ARGV.
 */
interface AnswerCommands {
  gwRcStore(...keysThenArgs: (number | string)[]): Promise<number>;
  gwRcInvalidate(...keysThenArgs: (number | string)[]): Promise<[left: number[], taken: string[]]>;
  gwRcSettle(key: string, token: string, value: string, ttl: number): Promise<number>;
  get(key: string): Promise<string | null>;
  set(key: string, value: string, px: 'PX', ttl: number): Promise<'OK' | null>;
  unlink(...keys: string[]): Promise<number>;
}

/**
 * The Redis store's answers and the indexes of their entities: an answer is written only if none
 * of its entities was invalidated since its lookup, checked in the same script per slot, and an
 * invalidation evicts what the indexes name, at most 500 answers per script (a popular entity is
 * evicted in several round trips, never by a pattern scan). Every call goes to Redis as it is:
 * the store decides when Redis may be asked.
 *
 * A write's check and its answer are one script when they share a slot (always, but on a
 * Cluster). On a Cluster they cannot: the answer's key first gets this write's own placeholder (a
 * miss to readers), each slot of its entities is checked and indexed, and only then is its JSON
 * set, if the key still holds that placeholder (an invalidation that took it off an index in
 * between deleted it; a later write may have put its own there).
 */
export class RedisAnswers {
  readonly #client: AnswerCommands;
  /** How long an invalidation is remembered: twice as long as a lookup's epoch is good, and a clock skew. */
  readonly #rememberMs: number;
  readonly #holdBeforeLastStep: (() => Promise<void>) | undefined;

  constructor(
    private readonly redis: SharedRedis,
    private readonly prefix: string,
    options: {
      /** The longest a lookup's epoch stays good for a write. */
      readonly raceWindowMs: number;
      /** Tests only: awaited by a write on a Cluster between its entities' checks and its last step. */
      readonly holdBeforeLastStep?: (() => Promise<void>) | undefined;
    },
  ) {
    redis.client.defineCommand('gwRcStore', { lua: storeScript });
    redis.client.defineCommand('gwRcInvalidate', { lua: invalidateScript });
    redis.client.defineCommand('gwRcSettle', { numberOfKeys: 1, lua: settleScript });
    this.#client = redis.client as unknown as AnswerCommands;
    this.#rememberMs = 2 * options.raceWindowMs + CLOCK_SKEW_MS;
    this.#holdBeforeLastStep = options.holdBeforeLastStep;
  }

  /** The Redis key of the answer kept under the cache key `key`. */
  readonly keyOf = (key: string): string => `${this.prefix}a:${key}`;

  /** An entity's index and version keys, in one slot. */
  readonly #entityKeys = (name: string): string[] => [`${this.prefix}{${name}}:i`, `${this.prefix}{${name}}:v`];

  /** What Redis holds under the cache key `key`: an answer as `stamped` wrote it, a write's placeholder, or nothing. */
  get(key: string): Promise<string | null> {
    return this.#client.get(this.keyOf(key));
  }

  /**
   * Stores `value` under `key` for `ttl` ms (its TTL and the time it is kept past it), indexed by `names`, unless one
   * of them was invalidated since `notBefore`.
   */
  async store(key: string, value: string, ttl: number, names: readonly string[], notBefore: number): Promise<boolean> {
    const now = Date.now();
    const answerKey = this.keyOf(key);
    const check = (group: readonly string[], own: boolean) => {
      const keys = [...(own ? [answerKey] : []), ...group.flatMap(this.#entityKeys)];
      return this.#client.gwRcStore(keys.length, ...keys, own ? '1' : '0', key, own ? value : '', ttl, notBefore, now);
    };
    const groups = this.redis.bySlot([answerKey, ...names.flatMap(this.#entityKeys)], (name) => name);
    if (groups.length === 1) return (await check(names, true)) === 1;
    // This write's own placeholder: its last step sets the answer only over it, never over another
    // write's placeholder or answer (an invalidation may delete it, and a fresher write put its own).
    const token = randomUUID();
    await this.#client.set(answerKey, token, 'PX', ttl);
    const settle = (settled: string) => this.#client.gwRcSettle(answerKey, token, settled, ttl);
    const checked = await Promise.all(
      this.redis.bySlot(names, (name) => this.#entityKeys(name)[0]!).map((group) => check(group, false)),
    ).catch(async (error: unknown) => {
      await settle('').catch(() => undefined);
      throw error;
    });
    await this.#holdBeforeLastStep?.();
    const allowed = checked.every((stored) => stored === 1);
    const settled = await settle(allowed ? value : '');
    return allowed && settled === 1;
  }

  /**
   * Deletes the answers `work.answers` names, then every answer the entities `work.names` index,
   * in rounds of 500 per slot, dating the entities' invalidation `at`; the answer keys a round took
   * off an index stay in `pending` until deleted. Resolves with the answer keys deleted, and how
   * many of them Redis still held.
   */
  async evict(work: Evictions, pending: Set<string>, at: number): Promise<{ deleted: string[]; held: number }> {
    const deleted: string[] = [];
    let held = 0;
    const unlink = async (keys: readonly string[]) => {
      for (const key of keys) pending.add(key);
      const counts = await Promise.all(
        this.redis.bySlot(keys, this.keyOf).map((group) => this.#client.unlink(...group.map(this.keyOf))),
      );
      for (const key of keys) pending.delete(key);
      deleted.push(...keys);
      held += counts.reduce((sum, count) => sum + count, 0);
    };
    await unlink(work.answers);
    const rounds = this.redis
      .bySlot(work.names, (name) => this.#entityKeys(name)[0]!)
      .map(async (group) => {
        for (let first = true, left = group; left.length > 0; first = false) {
          const keys = left.flatMap(this.#entityKeys);
          const [open, taken] = await this.#client.gwRcInvalidate(
            keys.length,
            ...keys,
            EVICTIONS_PER_CALL,
            first ? at : '',
            this.#rememberMs,
          );
          await unlink(taken);
          left = open.map((position) => left[(position - 1) / 2]!);
        }
      });
    await Promise.all(rounds);
    return { deleted, held };
  }
}
