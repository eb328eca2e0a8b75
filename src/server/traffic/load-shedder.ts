import { monitorEventLoopDelay } from 'node:perf_hooks';
import { GraphQLError } from 'graphql';
import type { LoadSheddingSettings } from '../../config.js';
import type { Caller } from '../callers.js';
import { CallerShares } from './caller-shares.js';

/** How often the loop's delay is read (its histogram reset): a loop that lagged reads so for one window more. */
const DELAY_WINDOW_MS = 500;
/**
 * The median: a loop held up turn after turn (work queued faster than it is done), not one long pause (a collection,
 * a big document compiled) that a high percentile of a window of some 50 samples would take for overload.
 */
const DELAY_PERCENTILE = 50;
/** The histogram's sampling timer: Node's default, and prom-client's default metrics'. */
const DELAY_RESOLUTION_MS = 10;

/** Why an operation was refused, as `gateway_overload_refusals_total{reason}` (its help says what each means). */
export const overloadReasons = ['caller_share', 'cap', 'event_loop', 'upstream_queue'] as const;
export type OverloadReason = (typeof overloadReasons)[number];

/** What passes a threshold (each off at 0): the operations in flight, the event loop's delay, the upstream queue. */
type Overload = Exclude<OverloadReason, 'caller_share'>;

/** Operations in flight at most with no cap (SHED_MAX_IN_FLIGHT=0): what bounds the per-caller counts then. */
const CEILING_WITHOUT_CAP = 100_000;

export interface LoadShedderOptions {
  /** The upstream pool's queue (upstream.ts: `queuedCalls`). */
  readonly queuedCalls: () => number;
  readonly onRefused: (reason: OverloadReason) => void;
}

/**
 * The gateway's load, process-wide, and whether a new operation is refused for it (503 OVERLOADED): overloaded when
 * in flight reaches the cap, the loop's delay its threshold, or the upstream queue its own (operations making many
 * calls fill the pool long before the cap). Then it refuses the callers holding the most, not whoever comes next (the
 * SRE book's "Handling Overload": per-client shares, the heaviest refused first and cheaply): those at their share of
 * what is in flight (by known token or address: traffic/caller-shares.ts); at twice the cap, everyone. The delay is
 * read every DELAY_WINDOW_MS on an unref'd timer, so a check costs counters and a flag. The gauges show whatever the
 * thresholds: an autoscaler watches them before shedding starts.
 */
export class LoadShedder {
  #inFlight = 0;
  /** The last window's median delay, in ms. */
  delayMs = 0;
  #lagging = false;
  readonly #shares = new CallerShares();
  readonly #cap: number;
  readonly #ceiling: number;
  readonly #histogram = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS });
  readonly #timer: NodeJS.Timeout;

  constructor(
    readonly settings: LoadSheddingSettings,
    private readonly options: LoadShedderOptions,
  ) {
    const { maxInFlight } = settings;
    this.#ceiling = maxInFlight === 0 ? CEILING_WITHOUT_CAP : 2 * maxInFlight;
    this.#cap = maxInFlight === 0 ? this.#ceiling : maxInFlight;
    this.#histogram.enable();
    this.#timer = setInterval(() => this.#sample(), DELAY_WINDOW_MS).unref();
  }

  /** Operations admitted whose answer is not yet out (an @defer/@stream one until its last part): the one count. */
  get inFlight(): number {
    return this.#inFlight;
  }

  overloaded(): GraphQLError {
    const seconds = this.settings.retryAfterSeconds;
    return new GraphQLError(`The gateway is overloaded: try again in ${seconds} s.`, {
      extensions: {
        code: 'OVERLOADED',
        retryAfterSeconds: seconds,
        http: { status: 503, headers: { 'Retry-After': String(seconds) } },
      },
    });
  }

  get upstreamQueued(): number {
    return this.options.queuedCalls();
  }

  /** Why a new operation of `caller` is refused now, counted; undefined when it may run. */
  refusal(caller: Caller): OverloadReason | undefined {
    const overload = this.#overload();
    if (overload === undefined) return undefined;
    const reason = this.#inFlight >= this.#ceiling ? 'cap' : this.#refusedUnder(overload, caller);
    if (reason !== undefined) this.options.onRefused(reason);
    return reason;
  }

  /** Why a subscription's event is refused now, counted: events are shed as a class, first, whatever anyone holds. */
  eventRefusal(): OverloadReason | undefined {
    const overload = this.#overload();
    if (overload !== undefined) this.options.onRefused(overload);
    return overload;
  }

  /** Admits a new operation of `caller` (held until `release`), or refuses it (false). */
  admit(caller: Caller): boolean {
    if (this.refusal(caller) !== undefined) return false;
    this.hold(caller);
    return true;
  }

  /** Counts more operations of `caller` in flight, its request admitted already (a batch's others). */
  hold(caller: Caller, operations = 1): void {
    this.#inFlight += operations;
    this.#shares.hold(caller, operations);
  }

  release(caller: Caller, operations = 1): void {
    this.#inFlight -= operations;
    this.#shares.release(caller, operations);
  }

  /** The callers holding the most operations in flight now, their keys hashed (caller-shares.ts: the status page's). */
  heaviest(count: number): { readonly caller: string; readonly inFlight: number }[] {
    return this.#shares.heaviest(count);
  }

  close(): void {
    clearInterval(this.#timer);
    this.#histogram.disable();
  }

  #overload(): Overload | undefined {
    if (this.#inFlight >= this.#cap) return 'cap';
    if (this.#lagging) return 'event_loop';
    const { maxUpstreamQueued } = this.settings;
    return maxUpstreamQueued > 0 && this.options.queuedCalls() >= maxUpstreamQueued ? 'upstream_queue' : undefined;
  }

  /**
   * Overloaded below the ceiling: callers at their share of what is in flight (the cap at most) are refused. With
   * nothing in flight, a lagging loop is held by something else (all refused until a window without lag), but an
   * upstream queue is no operation's (calls of operations already over, polling's reads): nobody is refused for it.
   */
  #refusedUnder(overload: Overload, caller: Caller): OverloadReason | undefined {
    const shared = Math.min(this.#cap, this.#inFlight);
    if (shared === 0) return overload === 'event_loop' ? overload : undefined;
    return this.#shares.atShare(caller, shared) ? 'caller_share' : undefined;
  }

  #sample(): void {
    // The histogram's timer was due first: a loop held for a second has recorded it by now. Each sample is the whole
    // interval between its runs: the delay is what is past its resolution.
    this.delayMs = Math.max(0, this.#histogram.percentile(DELAY_PERCENTILE) / 1e6 - DELAY_RESOLUTION_MS);
    this.#histogram.reset();
    this.#lagging = this.settings.eventLoopDelayMs > 0 && this.delayMs > this.settings.eventLoopDelayMs;
  }
}
