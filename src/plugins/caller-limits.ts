import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { createRequire } from 'node:module';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import type { RateLimiterAbstract, RateLimiterRedis } from 'rate-limiter-flexible';
import type { CallerLimitSettings } from '../config.js';
import type { GatewayContext } from '../context.js';
import type { SharedRedis } from '../shared-state.js';

const callerKey = Symbol('caller-limits.caller');

/** The limits a caller can reach, as `gateway_refusals_total{limit}` and `extensions.limit` name them. */
export type CallerLimit = 'requests' | 'upstream_calls' | 'in_flight';

/** The counters behind the limits that are set (an unset one is undefined: off). */
export interface CallerLimiters {
  readonly requests?: RateLimiterAbstract | undefined;
  readonly upstreamCalls?: RateLimiterAbstract | undefined;
  readonly inFlight?: RateLimiterAbstract | undefined;
}

/**
 * Whom an operation is charged to: its bearer token, hashed (the token itself is never kept, in
 * memory or in Redis), or else its client address: the first X-Forwarded-For hop when a proxy
 * in front sets it (TRUST_PROXY), the connection's peer otherwise (the Node adapter hands yoga
 * the IncomingMessage as `req`). Worked out once per HTTP request, kept on the IncomingMessage.
 */
function callerOf(request: Request, serverContext: { req?: IncomingMessage }, trustProxy: boolean): string {
  const req = serverContext.req as (IncomingMessage & { [callerKey]?: string }) | undefined;
  const known = req?.[callerKey];
  if (known !== undefined) return known;
  const caller = callerFrom(request.headers.get('authorization') ?? undefined, request.headers.get('x-forwarded-for') ?? undefined, req?.socket?.remoteAddress, trustProxy);
  if (req !== undefined) req[callerKey] = caller;
  return caller;
}

function callerFrom(authorization: string | undefined, forwardedFor: string | undefined, peer: string | undefined, trustProxy: boolean): string {
  const token = authorization?.trim();
  if (token) return `token:${createHash('sha256').update(token).digest('base64url')}`;
  const forwarded = trustProxy ? forwardedFor?.split(',')[0]?.trim() : undefined;
  return `address:${forwarded || peer || 'unknown'}`;
}

const header = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** What the HTTP server asks before handing a request to yoga: a refusal to answer at once, or nothing. */
export type EarlyRefusal = (request: IncomingMessage) => { readonly status: 429; readonly headers: Record<string, string>; readonly body: string } | undefined;

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
  };
}

const words: Record<CallerLimit, string> = { requests: 'operations', upstream_calls: 'upstream calls', in_flight: 'operations in flight' };

/** A refusal's message and extensions, as a client reads them (through yoga, or from the HTTP server before it). */
function refusal(limit: CallerLimit, msBeforeNext: number) {
  const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return { message: `Too many ${words[limit]} from this caller: try again in ${seconds} s.`, extensions: { code: 'RATE_LIMITED', limit, retryAfterSeconds: seconds } };
}

function rateLimited(limit: CallerLimit, msBeforeNext: number) {
  const { message, extensions } = refusal(limit, msBeforeNext);
  return createGraphQLError(message, { extensions: { ...extensions, http: { status: 429, headers: { 'Retry-After': String(extensions.retryAfterSeconds) } } } });
}

/** Takes `points` from a caller's budget: the refusal's wait in ms, or undefined when granted (a store failure grants: limits fail open). */
async function take(limiter: RateLimiterAbstract, caller: string, points: number): Promise<number | undefined> {
  try {
    await limiter.consume(caller, points);
    return undefined;
  } catch (refusal) {
    return refusal instanceof rateLimiters().RateLimiterRes ? refusal.msBeforeNext : undefined;
  }
}

const holdKey = Symbol('caller-limits.hold');

/** An in-flight slot, released once: when the operation's result is in, or when the response goes. */
interface Hold {
  readonly caller: string;
  released: boolean;
}

type WithCaller = { [callerKey]?: string; [holdKey]?: Hold };

export interface CallerLimitsOptions {
  readonly limiters: CallerLimiters;
  readonly trustProxy: boolean;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: (limit: CallerLimit) => void;
}

/**
 * Per-caller limits, checked before an operation costs anything (plugins order: before persisted
 * documents and parsing for the operation count and the in-flight slots; right after the plan
 * for the upstream calls, charged with the plan's count). A refusal is HTTP 429 (200 inside a
 * batch, as every per-operation error there) with `Retry-After` in whole seconds and a GraphQL
 * error with code RATE_LIMITED and `extensions.limit`; it makes no upstream call. Each caller has
 * counters of its own, so one at its limit costs another nothing but the refusals' CPU.
 */
export function useCallerLimits(options: CallerLimitsOptions): { admission: Plugin[]; charge: Plugin[]; refuseEarly: EarlyRefusal | undefined } {
  const { requests, upstreamCalls, inFlight } = options.limiters;
  const admits = requests !== undefined || inFlight !== undefined;
  // Callers refused a moment ago, until their window turns or a slot of theirs comes back: the
  // HTTP server answers their next requests itself, before yoga reads a byte of the body (a
  // refusal through yoga cost some 0.5 ms of CPU, which a caller flooding at its limit took from
  // everyone else). Bounded: the oldest are forgotten first, and then only cost a yoga refusal.
  const refused = new LRUCache<string, { limit: CallerLimit; until: number }>({ max: 100_000 });
  const refuse = (limit: CallerLimit, msBeforeNext: number, caller: string) => {
    options.onRefused?.(limit);
    refused.set(caller, { limit, until: Date.now() + Math.max(0, Math.min(msBeforeNext, 2_000)) });
    return rateLimited(limit, msBeforeNext);
  };
  const refuseEarly: EarlyRefusal = (request) => {
    const caller = callerFrom(header(request.headers.authorization), header(request.headers['x-forwarded-for']), request.socket.remoteAddress, options.trustProxy);
    (request as IncomingMessage & { [callerKey]?: string })[callerKey] = caller;
    const memo = refused.get(caller);
    if (memo === undefined) return undefined;
    const wait = memo.until - Date.now();
    if (wait <= 0) {
      refused.delete(caller);
      return undefined;
    }
    options.onRefused?.(memo.limit);
    const error = refusal(memo.limit, wait);
    return {
      status: 429,
      headers: { 'content-type': 'application/json; charset=utf-8', 'retry-after': String(error.extensions.retryAfterSeconds) },
      body: JSON.stringify({ errors: [error] }),
    };
  };
  const holds = new WeakMap<Request, Hold[]>();
  const release = (hold: Hold | undefined) => {
    if (hold === undefined || hold.released) return;
    hold.released = true;
    if (refused.peek(hold.caller)?.limit === 'in_flight') refused.delete(hold.caller);
    // Zero in flight: the key goes, so idle callers cost no memory (Redis's script does it there).
    void inFlight!.reward(hold.caller).then(
      (left) => (left.consumedPoints <= 0 && !(inFlight instanceof rateLimiters().RateLimiterRedis) ? inFlight!.delete(hold.caller) : undefined),
      () => undefined,
    );
  };

  const admission: Plugin = {
    async onParams({ request, context, setResult }) {
      const state = context as WithCaller & { req?: IncomingMessage };
      const caller = callerOf(request, state, options.trustProxy);
      state[callerKey] = caller;
      if (requests !== undefined) {
        const wait = await take(requests, caller, 1);
        if (wait !== undefined) return setResult({ errors: [refuse('requests', wait, caller)] });
      }
      if (inFlight !== undefined) {
        if ((await take(inFlight, caller, 1)) !== undefined) {
          // The refused attempt was counted too: given back at once.
          void inFlight.reward(caller).catch(() => undefined);
          return setResult({ errors: [refuse('in_flight', 1_000, caller)] });
        }
        const hold: Hold = { caller, released: false };
        state[holdKey] = hold;
        const list = holds.get(request);
        if (list === undefined) holds.set(request, [hold]);
        else list.push(hold);
      }
      return undefined;
    },
    onExecutionResult({ context }) {
      if (inFlight !== undefined) release((context as WithCaller)[holdKey]);
    },
    onResponse({ request }) {
      // Operations that never reached a result (a parse error thrown, a batch refused whole).
      for (const hold of holds.get(request) ?? []) release(hold);
    },
  };
  const charge: Plugin = {
    async onExecute({ args, setResultAndStopExecution }) {
      const context = args.contextValue as unknown as GatewayContext & WithCaller;
      const caller = context[callerKey];
      const calls = context.plan.calls;
      if (caller === undefined || calls === 0) return;
      const wait = await take(upstreamCalls!, caller, calls);
      // Not remembered for the door: an operation that plans no call must still pass.
      if (wait !== undefined) {
        options.onRefused?.('upstream_calls');
        setResultAndStopExecution({ errors: [rateLimited('upstream_calls', wait)] });
      }
    },
  };
  // The charge goes right after the plan (plugins/upstream-plan.ts), whose count it reads.
  return {
    admission: admits || upstreamCalls !== undefined ? [admission] : [],
    charge: upstreamCalls === undefined ? [] : [charge],
    refuseEarly: admits ? refuseEarly : undefined,
  };
}
