import { createRequire } from 'node:module';
import type { RateLimiterAbstract, RateLimiterMemory } from 'rate-limiter-flexible';
import type { CallerLimitSettings } from '../config.js';
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

type LimiterOptions = ConstructorParameters<typeof RateLimiterMemory>[0];

/** The process's own counters, standing in while Redis cannot answer; each use is counted. */
function countedFallback(options: LimiterOptions, onUse: () => void): RateLimiterAbstract {
  const fallback = new (rateLimiters().RateLimiterMemory)(options);
  const consume = fallback.consume.bind(fallback);
  fallback.consume = (...args) => {
    onUse();
    return consume(...args);
  };
  return fallback;
}

/**
 * In-flight counts in Redis: the key's lifetime restarts with every change (the default script
 * sets it once, so a busy caller's count would expire under its running operations) and the key
 * goes at zero, never below (a release that finds it expired must not lend a slot).
 */
const inFlightScript = `local n = redis.call('incrby', KEYS[1], ARGV[1])
if n <= 0 then
  redis.call('del', KEYS[1])
  return {0, 0}
end
redis.call('expire', KEYS[1], ARGV[2])
return {n, redis.call('pttl', KEYS[1])}`;

function limiter(name: string, points: number, durationSeconds: number, redis: SharedRedis | undefined, script?: string): RateLimiterAbstract {
  const options = { keyPrefix: `gw:${name}`, points, duration: durationSeconds };
  // In one process an in-flight count is exact (every slot is given back once): it needs no expiry.
  const { RateLimiterMemory, RateLimiterRedis } = rateLimiters();
  if (redis === undefined) return new RateLimiterMemory(script === undefined ? options : { ...options, duration: 0 });
  // Redis down: each process counts on its own (the limit holds per process) rather than refusing.
  return new RateLimiterRedis({
    ...options,
    storeClient: redis.client,
    rejectIfRedisNotReady: true,
    insuranceLimiter: countedFallback(options, () => redis.fellBack('limits')),
    ...(script === undefined ? {} : { customIncrTtlLuaScript: script }),
  });
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
    inFlight: settings.inFlight === undefined ? undefined : limiter('inflight', settings.inFlight, options.inFlightTtlSeconds, redis, inFlightScript),
    addressRequests: rate('address', settings.addressRequestsPerSecond),
  };
}

/** Takes `points` from a caller's budget: the refusal's wait in ms, or undefined when granted (a store failure grants: limits fail open). */
export async function take(limiter: RateLimiterAbstract, caller: string, points: number): Promise<number | undefined> {
  try {
    await limiter.consume(caller, points);
    return undefined;
  } catch (refusal) {
    return refusal instanceof rateLimiters().RateLimiterRes ? refusal.msBeforeNext : undefined;
  }
}

/** Gives one in-flight slot back; at zero the key goes, so idle callers cost no memory (Redis's script does it there). */
export function giveBack(inFlight: RateLimiterAbstract, caller: string): void {
  void inFlight.reward(caller).then(
    (left) => (left.consumedPoints <= 0 && !(inFlight instanceof rateLimiters().RateLimiterRedis) ? inFlight.delete(caller) : undefined),
    () => undefined,
  );
}
