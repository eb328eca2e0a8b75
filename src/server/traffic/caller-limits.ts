import type { IncomingMessage } from 'node:http';
import { createGraphQLError, finalAsyncIterator, isAsyncIterable, type Plugin } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import type { GatewayContext } from '../../schema/context.js';
import { credentialKeyOf } from '../../upstream/credential.js';
import { giveBack, take, waitOf, type CallerLimiters, type Limiter } from './limiters.js';
import { RateLimitHeaders } from './rate-limit-headers.js';

const callerKey = Symbol('caller-limits.caller');
const payerKey = Symbol('caller-limits.payer');

/** The limits a caller can reach, as `gateway_refusals_total{limit}` and `extensions.limit` name them. */
export type CallerLimit = 'requests' | 'upstream_calls' | 'in_flight' | 'address';

/** Whom an operation is charged to: its caller, and the client address the per-address limit counts. */
interface Payer {
  /** The bearer token, hashed, or else the client address. */
  readonly caller: string;
  readonly address: string;
}

/**
 * Whom an operation is charged to: its bearer token, hashed (the token itself is never kept, in
 * memory or in Redis), or else its client address: the first X-Forwarded-For hop when a proxy
 * in front sets it (TRUST_PROXY), the connection's peer otherwise (the Node adapter hands yoga
 * the IncomingMessage as `req`). Worked out once per HTTP request, kept on the IncomingMessage.
 */
function payerOf(request: Request, serverContext: { req?: IncomingMessage }, trustProxy: boolean): Payer {
  const req = serverContext.req as (IncomingMessage & { [payerKey]?: Payer }) | undefined;
  const known = req?.[payerKey];
  if (known !== undefined) return known;
  const payer = payerFrom(request.headers.get('authorization') ?? undefined, request.headers.get('x-forwarded-for') ?? undefined, req?.socket?.remoteAddress, trustProxy);
  if (req !== undefined) req[payerKey] = payer;
  return payer;
}

/**
 * The caller an Authorization header names, `token:<SHA-256 of its normalised credential>`, or
 * undefined without one: what the caller limits count by and the response cache scopes answers
 * by. The token itself is never kept.
 */
export function tokenCallerOf(authorization: string | undefined): string | undefined {
  const key = credentialKeyOf(authorization);
  return key === undefined ? undefined : `token:${key}`;
}

function payerFrom(authorization: string | undefined, forwardedFor: string | undefined, peer: string | undefined, trustProxy: boolean): Payer {
  const forwarded = trustProxy ? forwardedFor?.split(',')[0]?.trim() : undefined;
  const address = `address:${forwarded || peer || 'unknown'}`;
  return { caller: tokenCallerOf(authorization) ?? address, address };
}

const header = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** What the HTTP server asks before handing a request to yoga: a refusal to answer at once, or nothing. */
export type EarlyRefusal = (request: IncomingMessage) => { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: string } | undefined;

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

const holdKey = Symbol('caller-limits.hold');

/** A slot's return has no date: a caller refused for its in-flight slots is told to try again in a second. */
const IN_FLIGHT_RETRY_MS = 1_000;

/**
 * An in-flight slot, released once: when the operation's result is in, or when the response goes;
 * for @defer/@stream, when the last part is out or the client hangs up.
 */
interface Hold {
  readonly caller: string;
  released: boolean;
  /** Its result is a stream of parts: the response going out is not the end of it. */
  streaming: boolean;
}

type WithCaller = { [callerKey]?: string; [holdKey]?: Hold };

export interface CallerLimitsOptions {
  readonly limiters: CallerLimiters;
  readonly trustProxy: boolean;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: (limit: CallerLimit) => void;
  /** Where refusals are remembered for the HTTP server to repeat (`callerDoor`). @default one of the plugin's own: refusals are answered by yoga only */
  readonly door?: Door | undefined;
}

/**
 * The door of `options`' limits, or undefined when none refuses at admission (the upstream-calls
 * limit alone never does): made once by the gateway, filled by useCallerLimits, asked by the HTTP
 * server (`refuseEarly`) before it hands a request to yoga.
 */
export function callerDoor(options: CallerLimitsOptions): Door | undefined {
  const { requests, inFlight, addressRequests } = options.limiters;
  return requests === undefined && inFlight === undefined && addressRequests === undefined ? undefined : doorFor(options);
}

function doorFor(options: CallerLimitsOptions): Door {
  const { requests, addressRequests, windowSeconds } = options.limiters;
  return new Door(options.onRefused, RateLimitHeaders.of({ requests, address: addressRequests }), windowSeconds * 1_000, options.trustProxy);
}

/**
 * Per-caller limits, checked before an operation costs anything (plugins order: before parsing
 * for the operation count and the in-flight slots, after the persisted documents' lookup and the
 * response cache's, so that a refusal replaces a cached answer; after the plan, whose onExecute
 * counts the upstream calls this charges in its own, which a cached answer is not charged). A refusal is HTTP 429 (200 inside a
 * batch, as every per-operation error there) with `Retry-After` in whole seconds and a GraphQL
 * error with code RATE_LIMITED and `extensions.limit`; it makes no upstream call. Each caller has
 * counters of its own, so one at its limit costs another nothing but the refusals' CPU.
 */
export function useCallerLimits(options: CallerLimitsOptions): Plugin {
  const { requests, upstreamCalls, inFlight, addressRequests } = options.limiters;
  const admits = requests !== undefined || inFlight !== undefined || addressRequests !== undefined;
  const door = options.door ?? doorFor(options);
  const { headers } = door;
  const refuse = (limit: CallerLimit, msBeforeNext: number, key: string) => {
    options.onRefused?.(limit);
    door.remember(key, limit, msBeforeNext);
    return rateLimited(limit, msBeforeNext);
  };
  const slots = inFlight === undefined ? undefined : new InFlightSlots(inFlight, door);

  const admission = {
    async onParams({ request, context, setResult }) {
      const state = context as WithCaller & { req?: IncomingMessage };
      const { caller, address } = payerOf(request, state, options.trustProxy);
      state[callerKey] = caller;
      // The address first: a made-up token's fresh window does not get past its address's.
      if (addressRequests !== undefined) {
        const taken = await take(addressRequests, address, 1);
        if (taken !== undefined) headers?.record(request, 'address', taken);
        const wait = waitOf(addressRequests, taken);
        if (wait !== undefined) return setResult({ errors: [refuse('address', wait, Door.addressKey(address))] });
      }
      if (requests !== undefined) {
        const taken = await take(requests, caller, 1);
        if (taken !== undefined) headers?.record(request, 'requests', taken);
        const wait = waitOf(requests, taken);
        if (wait !== undefined) return setResult({ errors: [refuse('requests', wait, caller)] });
      }
      if (slots !== undefined && !(await slots.take(request, state, caller))) return setResult({ errors: [refuse('in_flight', IN_FLIGHT_RETRY_MS, caller)] });
      return undefined;
    },
    onExecutionResult({ context, result, setResult }) {
      slots?.resultIn(context as WithCaller, result, setResult);
    },
    onResponse({ request, response }) {
      slots?.responseOut(request);
      headers?.write(request, response.headers);
    },
  } satisfies Plugin;
  const charge = {
    async onExecute({ args, setResultAndStopExecution }) {
      const context = args.contextValue as unknown as GatewayContext & WithCaller;
      const caller = context[callerKey];
      const calls = context.plan.calls;
      if (caller === undefined || calls === 0) return;
      const wait = waitOf(upstreamCalls!, await take(upstreamCalls!, caller, calls));
      // Not remembered for the door: an operation that plans no call must still pass.
      if (wait !== undefined) {
        options.onRefused?.('upstream_calls');
        setResultAndStopExecution({ errors: [rateLimited('upstream_calls', wait)] });
      }
    },
  } satisfies Plugin;
  // Only the hooks a limit needs: each costs every request. The charge reads the caller that admission names.
  if (upstreamCalls === undefined) return admits ? admission : {};
  return { ...admission, ...charge };
}

/** Refused callers (and addresses) the door remembers at most. */
const REMEMBERED_REFUSALS = 100_000;

/**
 * Callers (and addresses) refused a moment ago, until their window turns or a slot of theirs
 * comes back: the HTTP server answers their next requests itself, before yoga reads a byte of
 * the body (a refusal through yoga cost some 0.5 ms of CPU, which a caller flooding at its limit
 * took from everyone else). Bounded: the oldest are forgotten first, and then only cost a yoga
 * refusal.
 */
export class Door {
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
  readonly refuseEarly: EarlyRefusal = (request) => {
    const payer = payerFrom(header(request.headers.authorization), header(request.headers['x-forwarded-for']), request.socket.remoteAddress, this.trustProxy);
    (request as IncomingMessage & { [payerKey]?: Payer })[payerKey] = payer;
    const memo = this.#current(Door.addressKey(payer.address)) ?? this.#current(payer.caller);
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

/**
 * RATE_LIMIT_IN_FLIGHT's slots: one taken per operation admitted, given back once when its result
 * is in, or when the response goes (an operation that never reached a result: a parse error
 * thrown, a batch refused whole). An incremental result (@defer/@stream) keeps its slot until its
 * last part is out or its client hangs up: its first part is not the end of its work.
 */
class InFlightSlots {
  readonly #holds = new WeakMap<Request, Hold[]>();

  constructor(
    private readonly limiter: Limiter,
    private readonly door: Door,
  ) {}

  /** False when the caller has none left. */
  async take(request: Request, state: WithCaller, caller: string): Promise<boolean> {
    if (waitOf(this.limiter, await take(this.limiter, caller, 1)) !== undefined) {
      // The refused attempt was counted too: given back at once.
      void this.limiter.reward(caller).catch(() => undefined);
      return false;
    }
    const hold: Hold = { caller, released: false, streaming: false };
    state[holdKey] = hold;
    const list = this.#holds.get(request);
    if (list === undefined) this.#holds.set(request, [hold]);
    else list.push(hold);
    return true;
  }

  resultIn(state: WithCaller, result: unknown, setResult: (result: never) => void): void {
    const hold = state[holdKey];
    if (hold === undefined) return;
    if (!isAsyncIterable(result)) return this.#release(hold);
    // Its end: the last part taken, or the stream cancelled (the client hung up: yoga stops it).
    hold.streaming = true;
    setResult(finalAsyncIterator(result, () => this.#release(hold)) as never);
  }

  responseOut(request: Request): void {
    for (const hold of this.#holds.get(request) ?? []) if (!hold.streaming) this.#release(hold);
  }

  #release(hold: Hold): void {
    if (hold.released) return;
    hold.released = true;
    this.door.slotBack(hold.caller);
    giveBack(this.limiter, hold.caller);
  }
}
