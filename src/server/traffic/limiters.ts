import { createRequire } from 'node:module';
import type { RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { CallerLimitSettings } from '../../config.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';

/** What the caller limits use of a limiter: rate-limiter-flexible's public API. */
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
/**
 * rate-limiter-flexible, loaded with the first limiter: a gateway without limits (the default)
 * does not carry it, some 3 MB of memory.
 */
const rateLimiters = (): RateLimiterFlexible =>
  (loaded ??= createRequire(import.meta.url)('rate-limiter-flexible') as RateLimiterFlexible);

/**
 * A limit counted in Redis, and by this process alone while Redis cannot count it (no
 * connection, a write refused: `maxmemory` reached, a read-only replica): each call Redis could
 * not take is counted as a fallback (with its error when it was sent), then made on the
 * process's own counters. A refusal (rate-limiter-flexible rejects one with a RateLimiterRes) is
 * Redis's answer, not a failure. (rate-limiter-flexible's own `insuranceLimiter` does the same
 * without the error.)
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
 * The one counting script of every limiter on the process's Redis connection: rate-limiter-flexible
 * makes a limiter's script the connection's `rlflxIncr` command, so the last limiter made would
 * count for all (with an in-flight limit set, a rate window restarted with every operation and a
 * steady caller under its rate was refused for good). A window's count expires `duration` after
 * its first operation. An in-flight count (the `gw:inflight:` keys) has its lifetime restart
 * with every change (a busy caller's count must not expire under its running operations) and
 * goes at zero, never below (a release that finds it expired must not lend a slot).
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

/**
 * One limiter, in Redis when there is one. Its counters are one key each (`gw:<name>:<caller>`),
 * counted by a script of that key alone: on a Cluster each caller's counter lives in the slot of
 * its own key.
 */
export function limiter(
  name: string,
  points: number,
  durationSeconds: number,
  redis: SharedRedis | undefined,
): Limiter {
  const options = { keyPrefix: `gw:${name}`, points, duration: durationSeconds };
  // In one process an in-flight count is exact (every slot is given back once): it needs no expiry.
  const { RateLimiterMemory, RateLimiterRedis } = rateLimiters();
  if (redis === undefined) return new RateLimiterMemory(name === 'inflight' ? { ...options, duration: 0 } : options);
  // Redis down or refusing writes: each process counts on its own (the limit holds per process) rather than refusing.
  return countedInRedis(
    new RateLimiterRedis({ ...options, storeClient: redis.client, customIncrTtlLuaScript: countScript }),
    new RateLimiterMemory(options),
    redis,
  );
}

/**
 * The limiters the settings ask for (rate-limiter-flexible), in Redis when there is one. A rate
 * of R a second is a window of W seconds (RATE_LIMIT_WINDOW_SECONDS) holding W×R: a caller may
 * spend W seconds' worth at once, and R a second on average. In Redis an in-flight count is kept
 * for `inFlightTtlSeconds` after its last change, so the slots of a process that died free themselves.
 */
export function createCallerLimiters(
  settings: CallerLimitSettings,
  options: { redis?: SharedRedis | undefined; inFlightTtlSeconds: number },
): CallerLimiters {
  const { redis } = options;
  const { windowSeconds } = settings;
  const rate = (name: string, perSecond: number | undefined) =>
    perSecond === undefined ? undefined : limiter(name, windowSeconds * perSecond, windowSeconds, redis);
  return {
    requests: rate('requests', settings.requestsPerSecond),
    upstreamCalls: rate('calls', settings.upstreamCallsPerSecond),
    inFlight:
      settings.inFlight === undefined
        ? undefined
        : limiter('inflight', settings.inFlight, options.inFlightTtlSeconds, redis),
    addressRequests: rate('address', settings.addressRequestsPerSecond),
    windowSeconds,
  };
}

/**
 * Takes `points` from a caller's budget: the limiter's answer (its RateLimiterRes: the points left
 * in the window and the ms before it turns), granted or refused (see `waitOf`), or undefined when
 * the store failed (limits fail open). rate-limiter-flexible resolves a grant and rejects a
 * refusal with the same RateLimiterRes.
 */
export async function take(limiter: Limiter, caller: string, points: number): Promise<RateLimiterRes | undefined> {
  try {
    return await limiter.consume(caller, points);
  } catch (refusal) {
    return refusal instanceof rateLimiters().RateLimiterRes ? refusal : undefined;
  }
}

/**
 * A refusal's wait in ms, or undefined when `taken` granted the points (rate-limiter-flexible refuses past `points`
 * consumed).
 */
export function waitOf(limiter: Limiter, taken: RateLimiterRes | undefined): number | undefined {
  return taken !== undefined && taken.consumedPoints > limiter.points ? taken.msBeforeNext : undefined;
}

/**
 * Gives one in-flight slot back; at zero the key goes, so idle callers cost no memory (Redis's
 * script does it there; deleting the caller's key there would also delete a slot another process
 * took meanwhile).
 */
export function giveBack(inFlight: Limiter, caller: string): void {
  void inFlight.reward(caller).then(
    (left) =>
      left.consumedPoints <= 0 && inFlight instanceof rateLimiters().RateLimiterMemory
        ? inFlight.delete(caller)
        : undefined,
    () => undefined,
  );
}
