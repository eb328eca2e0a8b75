import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import type { RateLimiterRes } from 'rate-limiter-flexible';
import type { OperationState } from '../operation-state.js';
import type { OperationStep, Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import { type CallerLimiters, giveBack, take, waitOf } from './limiters.js';
import { RateLimitHeaders } from './rate-limit-headers.js';

/** The limits a caller can reach, as `gateway_refusals_total{limit}` and `extensions.limit` name them. */
export type CallerLimit = 'requests' | 'upstream_calls' | 'in_flight' | 'address' | 'logins';

const tooMany: Record<CallerLimit, string> = {
  requests: 'operations from this caller',
  upstream_calls: 'upstream calls from this caller',
  in_flight: 'operations in flight from this caller',
  address: 'operations from this address',
  logins: 'logins from this account or address',
};

/** A refusal by a caller limit (a limiter's, or one remembered): HTTP 429, `Retry-After`, code RATE_LIMITED. */
export function rateLimited(limit: CallerLimit, msBeforeNext: number) {
  const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return createGraphQLError(`Too many ${tooMany[limit]}: try again in ${seconds} s.`, {
    extensions: {
      code: 'RATE_LIMITED',
      limit,
      retryAfterSeconds: seconds,
      http: { status: 429, headers: { 'Retry-After': String(seconds) } },
    },
  });
}

/** A slot's return has no date: a caller refused for its in-flight slots is told to try again in a second. */
const IN_FLIGHT_RETRY_MS = 1_000;

/** An address's key among the refusals: a caller without a token is keyed by its address too, for its own limits. */
const addressKey = (address: string): string => `per-${address}`;

export interface CallerLimitsOptions {
  readonly limiters: CallerLimiters;
  readonly onRefused?: (limit: CallerLimit) => void;
}

/**
 * Per-caller limits, before an operation costs anything: the intake refuses at once whom a limit just refused (the
 * whole path cost some 0.5 ms of CPU a refusal, taken from everyone by a caller flooding at its limit); admission
 * counts before a kept answer is looked up, so a refusal replaces it. A step no set limit needs is left out (each
 * costs every request). Subscription events are nobody's request and charge no one (real-time/).
 */
export function useCallerLimits(options: CallerLimitsOptions): Policy | undefined {
  const { requests, upstreamCalls, inFlight, addressRequests, windowSeconds } = options.limiters;
  const admits = requests !== undefined || inFlight !== undefined || addressRequests !== undefined;
  const headers = RateLimitHeaders.of({ requests, address: addressRequests });
  const recent = new RecentRefusals(options.onRefused, windowSeconds * 1_000);
  const refuse = (limit: CallerLimit, msBeforeNext: number, key: string) => {
    options.onRefused?.(limit);
    recent.remember(key, limit, msBeforeNext);
    return rateLimited(limit, msBeforeNext);
  };
  /** Takes a point of a rate limit, if set: its answer kept for the headers, its refusal remembered. */
  const rate = async (state: RequestState, limit: 'address' | 'requests', key: string) => {
    const limiter = limit === 'address' ? addressRequests : requests;
    if (limiter === undefined) return undefined;
    const taken = await take(limiter, key, 1);
    if (taken !== undefined) state.quotas[limit] = taken;
    const wait = waitOf(limiter, taken);
    return wait === undefined ? undefined : refuse(limit, wait, limit === 'address' ? addressKey(key) : key);
  };
  const admission: OperationStep = async (operation) => {
    const state = operation.request;
    const { key: caller, address, known } = state.caller;
    // The address first: a made-up token's fresh window does not get past its address's; a known token's is its own.
    const refusal =
      (known ? undefined : await rate(state, 'address', address)) ?? (await rate(state, 'requests', caller));
    if (refusal !== undefined || inFlight === undefined) return refusal;
    if (waitOf(inFlight, await take(inFlight, caller, 1)) !== undefined) {
      // The refused attempt was counted too: given back at once.
      void inFlight.reward(caller).catch(() => undefined);
      return refuse('in_flight', IN_FLIGHT_RETRY_MS, caller);
    }
    // Given back once, by the result or release step below.
    operation.slot = caller;
    return undefined;
  };
  const charge: OperationStep = async (operation) => {
    const calls = operation.plan?.calls ?? 0;
    if (calls === 0) return undefined;
    const wait = waitOf(upstreamCalls!, await take(upstreamCalls!, operation.request.caller.key, calls));
    // Not remembered for the intake: an operation that plans no call must still pass.
    if (wait === undefined) return undefined;
    options.onRefused?.('upstream_calls');
    return rateLimited('upstream_calls', wait);
  };
  const slotBack = (operation: OperationState) => {
    const slot = operation.slot;
    if (slot === undefined) return;
    operation.slot = undefined;
    recent.slotBack(slot);
    void giveBack(inFlight!, slot);
  };
  if (!admits && upstreamCalls === undefined) return undefined;
  return {
    name: 'caller limits',
    intake: admits ? recent.intake : undefined,
    admission: admits ? admission : undefined,
    plan: upstreamCalls === undefined ? undefined : charge,
    answer: headers === undefined ? undefined : (request, answer) => headers.write(request.quotas, answer.headers),
    // An open stream (a subscription, a live query) holds no slot once it begins.
    result: inFlight === undefined ? undefined : (operation) => void (operation.streams && slotBack(operation)),
    release: inFlight === undefined ? undefined : (request) => request.operations.forEach(slotBack),
  };
}

type Refused = { readonly limit: CallerLimit; readonly until: number };

/** Whom a limit refused a moment ago, until the window turns or a slot comes back; the oldest forgotten first. */
class RecentRefusals {
  readonly #refused = new LRUCache<string, Refused>({ max: 100_000 });

  constructor(
    private readonly onRefused: ((limit: CallerLimit) => void) | undefined,
    /** The longest a refusal holds: the limiters' window. */
    private readonly longestMs: number,
  ) {}

  remember(key: string, limit: CallerLimit, msBeforeNext: number): void {
    this.#refused.set(key, { limit, until: Date.now() + Math.max(0, Math.min(msBeforeNext, this.longestMs)) });
  }

  /** A slot of `caller`'s came back: an in-flight refusal no longer holds. */
  slotBack(caller: string): void {
    if (this.#refused.peek(caller)?.limit === 'in_flight') this.#refused.delete(caller);
  }

  /** Refuses again, as the limiter did, whom it just refused (RateLimit: nothing left until the window turns). */
  readonly intake = (request: RequestState): GraphQLError | undefined => {
    const { caller } = request;
    const memo = (caller.known ? undefined : this.#current(addressKey(caller.address))) ?? this.#current(caller.key);
    if (memo === undefined) return undefined;
    this.onRefused?.(memo.limit);
    const wait = memo.until - Date.now();
    const nothingLeft = { remainingPoints: 0, msBeforeNext: wait } as RateLimiterRes;
    if (memo.limit === 'address' || memo.limit === 'requests') request.quotas[memo.limit] = nothingLeft;
    return rateLimited(memo.limit, wait);
  };

  #current(key: string): Refused | undefined {
    const memo = this.#refused.get(key);
    if (memo === undefined || memo.until > Date.now()) return memo;
    this.#refused.delete(key);
    return undefined;
  }
}
