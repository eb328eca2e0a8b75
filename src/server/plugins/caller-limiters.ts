import { createRequire } from 'node:module';
import type { RateLimiterAbstract, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { CallerLimitSettings } from '../../config.js';
import type { SharedRedis } from '../shared-state.js';

/** The counters behind the limits that are set (an unset one is undefined: off). */
export interface CallerLimiters {
  readonly requests?: RateLimiterAbstract | undefined;
  readonly upstreamCalls?: RateLimiterAbstract | undefined;
  readonly inFlight?: RateLimiterAbstract | undefined;
  /** Per client address, whoever the caller (RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND). */
  readonly addressRequests?: RateLimiterAbstract | undefined;
}

type RateLimiterFlexible = typeof import('rate-limiter-flexible');
let loaded: RateLimiterFlexible | undefined;
/**
 * rate-limiter-flexible, loaded with the first limiter: a gateway without limits (the default)
 * does not carry it, some 3 MB of memory.
 */
const rateLimiters = (): RateLimiterFlexible => (loaded ??= createRequire(import.meta.url)('rate-limiter-flexible') as RateLimiterFlexible);

/**
 * A limiter in Redis that tells of each Redis call that failed, with its error (no connection, or
 * a write refused: `maxmemory` reached, a read-only replica); its insurance, the process's own
 * counters, then answers. `_upsert` is the one store call that consume and reward make
 * (rate-limiter-flexible's interface for stores); a failure reaches the insurance without its error.
 */
function reportingRedisLimiter(options: ConstructorParameters<typeof RateLimiterRedis>[0], onFailure: (error: unknown) => void): RateLimiterAbstract {
  const limiter = new (rateLimiters().RateLimiterRedis)(options);
  const store = limiter as unknown as { _upsert(...args: unknown[]): Promise<unknown> };
  const upsert = store._upsert.bind(limiter);
  store._upsert = (...args) =>
    upsert(...args).catch((error: unknown) => {
      onFailure(error);
      throw error;
    });
  return limiter;
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

function limiter(name: string, points: number, durationSeconds: number, redis: SharedRedis | undefined): RateLimiterAbstract {
  const options = { keyPrefix: `gw:${name}`, points, duration: durationSeconds };
  // In one process an in-flight count is exact (every slot is given back once): it needs no expiry.
  const { RateLimiterMemory } = rateLimiters();
  if (redis === undefined) return new RateLimiterMemory(name === 'inflight' ? { ...options, duration: 0 } : options);
  // Redis down or refusing writes: each process counts on its own (the limit holds per process) rather than refusing.
  return reportingRedisLimiter(
    { ...options, storeClient: redis.client, rejectIfRedisNotReady: true, insuranceLimiter: new RateLimiterMemory(options), customIncrTtlLuaScript: countScript },
    (error) => redis.fellBack('limits', error),
  );
}

/**
 * The limiters the settings ask for (rate-limiter-flexible), in Redis when there is one. A rate
 * of R a second is a window of two seconds holding 2R: a caller may spend two seconds' worth at
 * once, and R a second on average. In Redis an in-flight count is kept for `inFlightTtlSeconds`
 * after its last change, so the slots of a process that died free themselves.
 */
export function createCallerLimiters(settings: CallerLimitSettings, options: { redis?: SharedRedis | undefined; inFlightTtlSeconds: number }): CallerLimiters {
  const { redis } = options;
  const rate = (name: string, perSecond: number | undefined) => (perSecond === undefined ? undefined : limiter(name, 2 * perSecond, 2, redis));
  return {
    requests: rate('requests', settings.requestsPerSecond),
    upstreamCalls: rate('calls', settings.upstreamCallsPerSecond),
    inFlight: settings.inFlight === undefined ? undefined : limiter('inflight', settings.inFlight, options.inFlightTtlSeconds, redis),
    addressRequests: rate('address', settings.addressRequestsPerSecond),
  };
}

/**
 * Takes `points` from a caller's budget: the limiter's answer (its RateLimiterRes: the points left
 * in the window and the ms before it turns), granted or refused (see `waitOf`), or undefined when
 * the store failed (limits fail open). rate-limiter-flexible resolves a grant and rejects a
 * refusal with the same RateLimiterRes.
 */
export async function take(limiter: RateLimiterAbstract, caller: string, points: number): Promise<RateLimiterRes | undefined> {
  try {
    return await limiter.consume(caller, points);
  } catch (refusal) {
    return refusal instanceof rateLimiters().RateLimiterRes ? refusal : undefined;
  }
}

/** A refusal's wait in ms, or undefined when `taken` granted the points (rate-limiter-flexible refuses past `points` consumed). */
export function waitOf(limiter: RateLimiterAbstract, taken: RateLimiterRes | undefined): number | undefined {
  return taken !== undefined && taken.consumedPoints > limiter.points ? taken.msBeforeNext : undefined;
}

/** Gives one in-flight slot back; at zero the key goes, so idle callers cost no memory (Redis's script does it there). */
export function giveBack(inFlight: RateLimiterAbstract, caller: string): void {
  void inFlight.reward(caller).then(
    (left) => (left.consumedPoints <= 0 && !(inFlight instanceof rateLimiters().RateLimiterRedis) ? inFlight.delete(caller) : undefined),
    () => undefined,
  );
}
