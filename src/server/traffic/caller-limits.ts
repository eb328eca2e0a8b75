import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import type { GatewayContext } from '../../schema/context.js';
import { callerOnArrival, type ArrivingRequest } from '../callers.js';
import type { EarlyRefusal } from '../http/refusal.js';
import { operationStateOf, requestStateOf } from '../request-state.js';
import { giveBack, take, waitOf, type CallerLimiters } from './limiters.js';
import { RateLimitHeaders } from './rate-limit-headers.js';

/** The limits a caller can reach, as `gateway_refusals_total{limit}` and `extensions.limit` name them. */
export type CallerLimit = 'requests' | 'upstream_calls' | 'in_flight' | 'address';

const words: Record<CallerLimit, string> = { requests: 'operations', upstream_calls: 'upstream calls', in_flight: 'operations in flight', address: 'operations' };

/** A refusal's message and extensions, as a client reads them (through yoga, or from the HTTP server before it). */
function refusal(limit: CallerLimit, msBeforeNext: number) {
  const seconds = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return { message: `Too many ${words[limit]} from this ${limit === 'address' ? 'address' : 'caller'}: try again in ${seconds} s.`, extensions: { code: 'RATE_LIMITED', limit, retryAfterSeconds: seconds } };
}

function rateLimited(limit: CallerLimit, msBeforeNext: number) {
  const { message, extensions } = refusal(limit, msBeforeNext);
  return createGraphQLError(message, { extensions: { ...extensions, http: { status: 429, headers: { 'Retry-After': String(extensions.retryAfterSeconds) } } } });
}

/** A slot's return has no date: a caller refused for its in-flight slots is told to try again in a second. */
const IN_FLIGHT_RETRY_MS = 1_000;

export interface CallerLimitsOptions {
  readonly limiters: CallerLimiters;
  readonly trustProxy: boolean;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: (limit: CallerLimit) => void;
  /** Where refusals are remembered for the HTTP server to repeat (`recentRefusalsOf`). @default one of the plugin's own: refusals are answered by yoga only */
  readonly recent?: RecentRefusals | undefined;
}

/**
 * The recent refusals of `options`' limits, or undefined when none refuses at admission (the
 * upstream-calls limit alone never does): made once by the gateway, filled by useCallerLimits,
 * asked by the HTTP server (`refuseEarly`) before it hands a request to yoga.
 */
export function recentRefusalsOf(options: CallerLimitsOptions): RecentRefusals | undefined {
  const { requests, inFlight, addressRequests } = options.limiters;
  return requests === undefined && inFlight === undefined && addressRequests === undefined ? undefined : newRecentRefusals(options);
}

function newRecentRefusals(options: CallerLimitsOptions): RecentRefusals {
  const { requests, addressRequests, windowSeconds } = options.limiters;
  return new RecentRefusals(options.onRefused, RateLimitHeaders.of({ requests, address: addressRequests }), windowSeconds * 1_000, options.trustProxy);
}

/**
 * Per-caller limits, checked before an operation costs anything, as two plugins the pipeline
 * places apart: `admission` (onParams: the per-address and per-caller operation counts and the
 * in-flight slot; after the persisted documents' lookup and the response cache's, so that a
 * refusal replaces a cached answer) and `charge` (onExecute, after the plan, whose call count it
 * charges; a cached answer is not charged). A refusal is HTTP 429 (200 inside a batch, as every
 * per-operation error there) with `Retry-After` in whole seconds and a GraphQL error with code
 * RATE_LIMITED and `extensions.limit`; it makes no upstream call. Each caller has counters of its
 * own, so one at its limit costs another nothing but the refusals' CPU. Either is undefined when
 * no limit needs it: each hook costs every request.
 */
export function useCallerLimits(options: CallerLimitsOptions): { readonly admission: Plugin | undefined; readonly charge: Plugin | undefined } {
  const { requests, upstreamCalls, inFlight, addressRequests } = options.limiters;
  const admits = requests !== undefined || inFlight !== undefined || addressRequests !== undefined;
  const recent = options.recent ?? newRecentRefusals(options);
  const { headers } = recent;
  const refuse = (limit: CallerLimit, msBeforeNext: number, key: string) => {
    options.onRefused?.(limit);
    recent.remember(key, limit, msBeforeNext);
    return rateLimited(limit, msBeforeNext);
  };

  const admission = {
    async onParams({ context, setResult }) {
      const state = requestStateOf(context);
      const operation = operationStateOf(context);
      if (state === undefined || operation === undefined) return undefined;
      const { key: caller, address } = state.callerOf((context as { req?: ArrivingRequest }).req, options.trustProxy);
      // The address first: a made-up token's fresh window does not get past its address's.
      if (addressRequests !== undefined) {
        const taken = await take(addressRequests, address, 1);
        if (taken !== undefined) state.quotas.address = taken;
        const wait = waitOf(addressRequests, taken);
        if (wait !== undefined) return setResult({ errors: [refuse('address', wait, RecentRefusals.addressKey(address))] });
      }
      if (requests !== undefined) {
        const taken = await take(requests, caller, 1);
        if (taken !== undefined) state.quotas.requests = taken;
        const wait = waitOf(requests, taken);
        if (wait !== undefined) return setResult({ errors: [refuse('requests', wait, caller)] });
      }
      if (inFlight !== undefined) {
        if (waitOf(inFlight, await take(inFlight, caller, 1)) !== undefined) {
          // The refused attempt was counted too: given back at once.
          void inFlight.reward(caller).catch(() => undefined);
          return setResult({ errors: [refuse('in_flight', IN_FLIGHT_RETRY_MS, caller)] });
        }
        // Given back once, as its operation leaves the in-flight count (traffic/in-flight.ts calls `slotBack`).
        operation.slot = caller;
      }
      return undefined;
    },
    ...(headers === undefined
      ? {}
      : {
          onResponse({ serverContext, response }) {
            const state = requestStateOf(serverContext);
            if (state !== undefined) headers.write(state.quotas, response.headers);
          },
        }),
  } satisfies Plugin;
  const charge = {
    async onExecute({ args, setResultAndStopExecution }) {
      const context = args.contextValue as unknown as GatewayContext;
      const caller = requestStateOf(context)?.caller?.key;
      const calls = context.plan.calls;
      if (caller === undefined || calls === 0) return;
      const wait = waitOf(upstreamCalls!, await take(upstreamCalls!, caller, calls));
      // Not remembered for the HTTP server: an operation that plans no call must still pass.
      if (wait !== undefined) {
        options.onRefused?.('upstream_calls');
        setResultAndStopExecution({ errors: [rateLimited('upstream_calls', wait)] });
      }
    },
  } satisfies Plugin;
  // Only the hooks a limit needs: each costs every request. The charge reads the caller that admission names.
  return { admission: admits || upstreamCalls !== undefined ? admission : undefined, charge: upstreamCalls === undefined ? undefined : charge };
}

/**
 * What the in-flight count (traffic/in-flight.ts) tells as an operation that holds a slot leaves
 * it: the slot goes back to its caller, whose in-flight refusal no longer holds.
 */
export function slotReturner(limiters: CallerLimiters, recent: RecentRefusals | undefined): ((caller: string) => void) | undefined {
  const { inFlight } = limiters;
  if (inFlight === undefined) return undefined;
  return (caller) => {
    recent?.slotBack(caller);
    giveBack(inFlight, caller);
  };
}

/** Refused callers (and addresses) remembered at most. */
const REMEMBERED_REFUSALS = 100_000;

/**
 * Callers (and addresses) refused a moment ago, until their window turns or a slot of theirs
 * comes back: the HTTP server answers their next requests itself, before yoga reads a byte of
 * the body (a refusal through yoga cost some 0.5 ms of CPU, which a caller flooding at its limit
 * took from everyone else). Bounded: the oldest are forgotten first, and then only cost a yoga
 * refusal.
 */
export class RecentRefusals {
  readonly #refused = new LRUCache<string, { limit: CallerLimit; until: number }>({ max: REMEMBERED_REFUSALS });

  constructor(
    private readonly onRefused: ((limit: CallerLimit) => void) | undefined,
    /** The rate-limit headers of the limits it keeps (none without a per-caller or per-address rate). */
    readonly headers: RateLimitHeaders | undefined,
    /** The longest a refusal holds: the limiters' window. */
    private readonly longestMs: number,
    private readonly trustProxy: boolean,
  ) {}

  /** An address's own entry: a caller without a token is keyed by its address too, for its own limits. */
  static addressKey(address: string): string {
    return `per-${address}`;
  }

  remember(key: string, limit: CallerLimit, msBeforeNext: number): void {
    this.#refused.set(key, { limit, until: Date.now() + Math.max(0, Math.min(msBeforeNext, this.longestMs)) });
  }

  /** A slot of `caller`'s came back: an in-flight refusal no longer holds. */
  slotBack(caller: string): void {
    if (this.#refused.peek(caller)?.limit === 'in_flight') this.#refused.delete(caller);
  }

  /** The HTTP server's question: a caller (or address) refused a moment ago is refused again, before yoga. */
  readonly refuseEarly: EarlyRefusal = (request: ArrivingRequest) => {
    const caller = callerOnArrival(request, this.trustProxy);
    const memo = this.#current(RecentRefusals.addressKey(caller.address)) ?? this.#current(caller.key);
    if (memo === undefined) return undefined;
    this.onRefused?.(memo.limit);
    const wait = memo.until - Date.now();
    const error = refusal(memo.limit, wait);
    return {
      status: 429,
      headers: { 'content-type': 'application/json; charset=utf-8', 'retry-after': String(error.extensions.retryAfterSeconds), ...this.headers?.refusal(memo.limit, wait) },
      body: JSON.stringify({ errors: [error] }),
    };
  };

  #current(key: string): { limit: CallerLimit; until: number } | undefined {
    const memo = this.#refused.get(key);
    if (memo === undefined || memo.until > Date.now()) return memo;
    this.#refused.delete(key);
    return undefined;
  }
}
