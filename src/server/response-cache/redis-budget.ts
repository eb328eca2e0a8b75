import type { SharedRedis } from '../shared-state/shared-redis.js';
import type { ByteBound } from './cache.js';
import { CLOCK_SKEW_MS } from './redis-answers.js';

/**
 * What an answer weighs in Redis beyond its key's bytes: its value rounded up to the allocator's size class (up to a
 * quarter more), the key's own entry and expiry, and each index as one of its own (a sorted set key: some 1,050 bytes;
 * a member of a shared index costs a fifth of it). Measured with INFO's used_memory, answers of 300 bytes to 750 kB
 * with indexes of their own: 73 to 99 % of this weight (docs/response-cache.md#redis-memory).
 */
const BYTES_PER_VALUE_BYTE = 1.25;
const BYTES_PER_ANSWER = 500;
const BYTES_PER_INDEX = 1_100;

/** What an answer kept under the Redis key `answerKey` as `value`, in `indexes` indexes, weighs, estimated. */
export const weightOf = (answerKey: string, value: string, indexes: number): number =>
  Math.ceil(
    Buffer.byteLength(answerKey) +
      BYTES_PER_VALUE_BYTE * Buffer.byteLength(value) +
      BYTES_PER_ANSWER +
      indexes * BYTES_PER_INDEX,
  );

/** Buckets per longest TTL: the bytes charged in those spanning it (and a clock skew) bound what Redis may hold. */
const BUDGET_BUCKETS = 8;

/**
 * Keys, after the prefix: `{budget}:all:<n>` and `{budget}:caller:<scope>:<n>` (a scope: the caller, and its client
 * address), the bytes charged in bucket `n`, in one slot (a write's one extra script; reads never touch them).
 * KEYS: the whole cache's buckets, then each scope's, newest first, as many each. ARGV: an answer's weight, the budget
 * and a scope's share (bytes), how long a bucket is kept (ms), how many scopes. Refused (0, or -1 for a scope's share)
 * when the buckets and the weight go past a bound; otherwise charged to the newest bucket of each: 1.
 */
const chargeScript = `local weight, budget, share, keep, scopes = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = #KEYS / (scopes + 1)
local function spent(first)
  local total = 0
  for _, bytes in ipairs(redis.call('MGET', unpack(KEYS, first, first + n - 1))) do
    if bytes then total = total + tonumber(bytes) end
  end
  return total
end
if spent(1) + weight > budget then return 0 end
for g = 1, scopes do
  if spent(g * n + 1) + weight > share then return -1 end
end
for g = 0, scopes do
  redis.call('INCRBY', KEYS[g * n + 1], weight)
  redis.call('PEXPIRE', KEYS[g * n + 1], keep)
end
return 1`;

/** The script takes its number of keys first (ioredis's form for keys that vary), then the keys, then ARGV. */
interface BudgetCommands {
  gwRcCharge(...keysThenArgs: (number | string)[]): Promise<number>;
}

/**
 * The Redis store's byte budget, shared by every replica: an answer's weight charged in time buckets to the whole cache
 * (`budget.maxBytes`), its caller and its client address (`budget.callerBytes` each); what was charged in the last
 * `heldMs` (the longest an answer is kept) and a clock skew is all Redis may still hold. True, or the bound met.
 */
export function redisBudget(
  redis: SharedRedis,
  prefix: string,
  heldMs: number,
  budget: { readonly maxBytes: number; readonly callerBytes: number },
): (scopes: readonly string[], weight: number) => Promise<true | ByteBound> {
  redis.client.defineCommand('gwRcCharge', { lua: chargeScript });
  const client = redis.client as unknown as BudgetCommands;
  const bucketMs = Math.max(1_000, Math.ceil(heldMs / BUDGET_BUCKETS));
  const bucketsCounted = Math.ceil((heldMs + CLOCK_SKEW_MS) / bucketMs) + 1;
  const keptMs = bucketsCounted * bucketMs + CLOCK_SKEW_MS;
  return async (scopes, weight) => {
    const newest = Math.floor(Date.now() / bucketMs);
    const buckets = (owner: string) =>
      Array.from({ length: bucketsCounted }, (_, i) => `${prefix}{budget}:${owner}:${newest - i}`);
    const keys = [...buckets('all'), ...scopes.flatMap((scope) => buckets(`caller:${scope}`))];
    const argv = [weight, budget.maxBytes, budget.callerBytes, keptMs, scopes.length];
    const charged = await client.gwRcCharge(keys.length, ...keys, ...argv);
    return charged === 1 ? true : charged === 0 ? 'total' : 'caller';
  };
}
