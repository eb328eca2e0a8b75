import { randomUUID } from 'node:crypto';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import type { Evictions } from './eviction-journal.js';

/** How far apart replicas' clocks may be: a lookup this soon after an invalidation of its entities stores nothing. */
export const CLOCK_SKEW_MS = 1_000;

/** Answers evicted per round trip of one invalidation: one script never holds Redis for long. */
const EVICTIONS_PER_CALL = 500;

/*
 * Keys, after the prefix: `a:<key>` an answer (`<expires at, ms>:<JSON>`, or a write's placeholder: see `store`);
 * `{<name>}:i` the answer keys holding the entity `<name>` (`Type:id`, or `Type`), scored by expiry; `{<name>}:v` when
 * it was last invalidated. An entity's two keys share its hash tag (one slot of a Cluster, so one script may touch
 * both); answers and entities spread over every slot (Apollo Router's layout). Every key a script touches is one of
 * its KEYS; nothing is listed by pattern. The budget's keys are redis-budget.ts's.
 */

/**
 * KEYS: the answer's key if written here (ARGV[1] '1'), then each entity's index and version. ARGV: that flag, the
 * answer's key as indexes name it, its value, TTL (ms), the epoch's time less the clock skew, now (ms). 0 if an entity
 * was invalidated at or after that time; else the answer is stored and added to each index, whose expiry only grows
 * and which drops expired answers as one is added (so under steady traffic it holds only answers kept).
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
 * KEYS: each entity's index and version. ARGV: evictions allowed, the invalidation's time (ms; '' after its first
 * call), how long to remember it. Takes that many answer keys at most off the indexes (the caller deletes or owes
 * them), and returns them with the positions (1-based pairs) of the indexes left. The versions are set last and never
 * fail the script: under `maxmemory` a refused SET would lose the keys taken off (evictions are never refused); a
 * Redis that refuses writes stores no answer either.
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
 * KEYS: an answer's key. ARGV: a write's placeholder, the answer's value ('' to give up), its TTL in ms. Sets the
 * answer, or deletes the placeholder, only if the key still holds this write's placeholder: 1 when it did.
 */
const settleScript = `if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1`;

/** The scripts take their number of keys first (ioredis's form for keys that vary), then the keys, then ARGV. */
interface AnswerCommands {
  gwRcStore(...keysThenArgs: (number | string)[]): Promise<number>;
  gwRcInvalidate(...keysThenArgs: (number | string)[]): Promise<[left: number[], taken: string[]]>;
  gwRcSettle(key: string, token: string, value: string, ttl: number): Promise<number>;
  get(key: string): Promise<string | null>;
  set(key: string, value: string, px: 'PX', ttl: number): Promise<'OK' | null>;
  unlink(...keys: string[]): Promise<number>;
}

/**
 * The Redis store's answers and their entities' indexes, asked as the store says. A write's check and its answer are
 * one script when they share a slot (always, but on a Cluster). On a Cluster the answer's key first gets this write's
 * own placeholder (a miss to readers), each slot of its entities is checked and indexed, and only then is its JSON set
 * if the key still holds that placeholder (an invalidation may have deleted it, and a fresher write put its own).
 */
export class RedisAnswers {
  readonly #client: AnswerCommands;
  /** How long an invalidation is remembered: twice as long as a lookup's epoch is good, and a clock skew. */
  readonly #rememberMs: number;

  constructor(
    private readonly redis: SharedRedis,
    private readonly prefix: string,
    private readonly options: { readonly raceWindowMs: number; readonly holdBeforeLastStep?: () => Promise<void> },
  ) {
    redis.client.defineCommand('gwRcStore', { lua: storeScript });
    redis.client.defineCommand('gwRcInvalidate', { lua: invalidateScript });
    redis.client.defineCommand('gwRcSettle', { numberOfKeys: 1, lua: settleScript });
    this.#client = redis.client as unknown as AnswerCommands;
    this.#rememberMs = 2 * options.raceWindowMs + CLOCK_SKEW_MS;
  }

  readonly keyOf = (key: string): string => `${this.prefix}a:${key}`;

  /** An entity's index and version keys, in one slot. */
  readonly #entityKeys = (name: string): string[] => [`${this.prefix}{${name}}:i`, `${this.prefix}{${name}}:v`];

  /** What Redis holds under the cache key `key`: an answer as `stamped` wrote it, a write's placeholder, or nothing. */
  get(key: string): Promise<string | null> {
    return this.#client.get(this.keyOf(key));
  }

  /** Stores `value` under `key` for `ttl` ms, indexed by `names`, unless one was invalidated since `notBefore`. */
  async store(key: string, value: string, ttl: number, names: readonly string[], notBefore: number): Promise<boolean> {
    const now = Date.now();
    const answerKey = this.keyOf(key);
    const check = (group: readonly string[], own: boolean) => {
      const keys = [...(own ? [answerKey] : []), ...group.flatMap(this.#entityKeys)];
      return this.#client.gwRcStore(keys.length, ...keys, own ? '1' : '0', key, own ? value : '', ttl, notBefore, now);
    };
    const groups = this.redis.bySlot([answerKey, ...names.flatMap(this.#entityKeys)], (name) => name);
    if (groups.length === 1) return (await check(names, true)) === 1;
    const token = randomUUID();
    await this.#client.set(answerKey, token, 'PX', ttl);
    const settle = (settled: string) => this.#client.gwRcSettle(answerKey, token, settled, ttl);
    const checked = await Promise.all(
      this.redis.bySlot(names, (name) => this.#entityKeys(name)[0]!).map((group) => check(group, false)),
    ).catch(async (error: unknown) => {
      await settle('').catch(() => undefined);
      throw error;
    });
    await this.options.holdBeforeLastStep?.();
    const allowed = checked.every((stored) => stored === 1);
    const settled = await settle(allowed ? value : '');
    return allowed && settled === 1;
  }

  /**
   * Deletes the answers `work.answers` names, then those the entities `work.names` index, 500 a slot a round, dating
   * the invalidation `at`; keys taken off an index stay in `pending` until deleted. Resolves with those deleted, and
   * how many Redis held.
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
          const argv = [EVICTIONS_PER_CALL, first ? at : '', this.#rememberMs];
          const [open, taken] = await this.#client.gwRcInvalidate(keys.length, ...keys, ...argv);
          await unlink(taken);
          left = open.map((position) => left[(position - 1) / 2]!);
        }
      });
    await Promise.all(rounds);
    return { deleted, held };
  }
}
