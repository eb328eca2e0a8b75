import { createRequire } from 'node:module';
import type { RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { CallerLimitSettings } from '../../config.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';

/** What the caller limits use of rate-limiter-flexible's public API. */
export type Limiter = Pick<RateLimiterAbstract, 'points' | 'duration' | 'consume' | 'reward' | 'delete'>;

/** The counters behind the limits that are set (an unset one is undefined: off). */
export interface CallerLimiters {
  readonly requests?: Limiter | undefined;
  readonly upstreamCalls?: Limiter | undefined;
  readonly inFlight?: Limiter | undefined;
  /** Per client address, whoever the caller (RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND). */
  readonly addressRequests?: Limiter | undefined;
  /** The rate limiters' window in seconds (RATE_LIMIT_WINDOW_SECONDS): no refusal of theirs lasts longer. */
  readonly windowSeconds: number;
}

type RateLimiterFlexible = typeof import('rate-limiter-flexible');
let loaded: RateLimiterFlexible | undefined;
/** Loaded with the first limiter: a gateway without limits (the default) does not carry its some 3 MB of memory. */
const rateLimiters = (): RateLimiterFlexible =>
  (loaded ??= createRequire(import.meta.url)('rate-limiter-flexible') as RateLimiterFlexible);

/**
 * A limit counted in Redis, and by this process alone while Redis cannot (no connection, `maxmemory`, a read-only
 * replica) rather than refusing: each such call is counted as a fallback (with its error, as `insuranceLimiter` does
 * not), then made locally. A refusal (a rejected RateLimiterRes) is Redis's answer, not a failure.
 */
function countedInRedis(shared: RateLimiterRedis, local: RateLimiterMemory, redis: SharedRedis): Limiter {
  const orLocally = <T>(call: (limiter: RateLimiterAbstract) => Promise<T>): Promise<T> => {
    if (!redis.ready()) {
      redis.fellBack('limits');
      return call(local);
    }
    return call(shared).catch((error: unknown) => {
      if (error instanceof rateLimiters().RateLimiterRes) throw error;
      redis.fellBack('limits', error);
      return call(local);
    });
  };
  return {
    points: shared.points,
    duration: shared.duration,
    consume: (key, points, options) => orLocally((limiter) => limiter.consume(key, points, options)),
    reward: (key, points, options) => orLocally((limiter) => limiter.reward(key, points, options)),
    delete: (key, options) => orLocally((limiter) => limiter.delete(key, options)),
  };
}

/**
 * One script for every limiter: rate-limiter-flexible makes a limiter's script the connection's `rlflxIncr`, so the
 * last made would count for all (a steady caller was refused for good). A window expires `duration` after its first
 * operation; an in-flight count (`gw:inflight:`) lives on with every change (a busy caller's must not expire under
 * its operations) and goes at zero, never below (an expired one must not lend a slot).
 */
const countScript = `local n = redis.call('incrby', KEYS[1], ARGV[1])
if string.sub(KEYS[1], 1, 12) ~= 'gw:inflight:' then
  local ttl = redis.call('pttl', KEYS[1])
  if ttl == -1 then
    redis.call('expire', KEYS[1], ARGV[2])
    ttl = 1000 * ARGV[2]
  end
  return {n, ttl}
end
if n <= 0 then
  redis.call('del', KEYS[1])
  return {0, 0}
end
redis.call('expire', KEYS[1], ARGV[2])
return {n, redis.call('pttl', KEYS[1])}`;

/** One limiter, in Redis when there is one: a key per caller, its script touching it alone (one Cluster slot). */
export function limiter(name: string, points: number, seconds: number, redis: SharedRedis | undefined): Limiter {
  const options = { keyPrefix: `gw:${name}`, points, duration: seconds };
  // In one process an in-flight count is exact (every slot is given back once): it needs no expiry.
  const { RateLimiterMemory, RateLimiterRedis } = rateLimiters();
  if (redis === undefined) return new RateLimiterMemory(name === 'inflight' ? { ...options, duration: 0 } : options);
  return countedInRedis(
    new RateLimiterRedis({ ...options, storeClient: redis.client, customIncrTtlLuaScript: countScript }),
    new RateLimiterMemory(options),
    redis,
  );
}

/**
 * A rate of R a second is a window of W seconds (RATE_LIMIT_WINDOW_SECONDS) holding W×R: W seconds' worth at once.
 * In Redis an in-flight count lasts `inFlightTtlSeconds` after its last change, so a dead process's slots come back.
 */
export function createCallerLimiters(
  settings: CallerLimitSettings,
  options: { redis?: SharedRedis | undefined; inFlightTtlSeconds: number },
): CallerLimiters {
  const { windowSeconds, inFlight } = settings;
  const { redis, inFlightTtlSeconds } = options;
  const rate = (name: string, perSecond: number | undefined) =>
    perSecond === undefined ? undefined : limiter(name, windowSeconds * perSecond, windowSeconds, redis);
  return {
    requests: rate('requests', settings.requestsPerSecond),
    upstreamCalls: rate('calls', settings.upstreamCallsPerSecond),
    inFlight: inFlight === undefined ? undefined : limiter('inflight', inFlight, inFlightTtlSeconds, redis),
    addressRequests: rate('address', settings.addressRequestsPerSecond),
    windowSeconds,
  };
}

/** Takes `points`: the limiter's answer, granted or refused (`waitOf`), or undefined if the store failed: fail open. */
export async function take(limiter: Limiter, caller: string, points: number): Promise<RateLimiterRes | undefined> {
  try {
    return await limiter.consume(caller, points);
  } catch (refusal) {
    return refusal instanceof rateLimiters().RateLimiterRes ? refusal : undefined;
  }
}

/** A refusal's wait in ms, or undefined when `taken` granted the points (refused past `points` consumed). */
export function waitOf(limiter: Limiter, taken: RateLimiterRes | undefined): number | undefined {
  return taken !== undefined && taken.consumedPoints > limiter.points ? taken.msBeforeNext : undefined;
}

/** At zero the key goes, so idle callers cost no memory (in Redis the script does: another process may hold one). */
export async function giveBack(inFlight: Limiter, caller: string): Promise<void> {
  const left = await inFlight.reward(caller).catch(() => undefined);
  if (left !== undefined && left.consumedPoints <= 0 && inFlight instanceof rateLimiters().RateLimiterMemory)
    await inFlight.delete(caller);
}
