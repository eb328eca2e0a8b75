import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import { GraphQLError } from 'graphql';
import type { LoadSheddingSettings } from '../../config.js';
import type { Caller } from '../callers.js';
import { CallerShares } from './caller-shares.js';

/**
 * How often the event loop's delay is read (and its histogram started again): a loop that lagged
 * is read as lagging for one window after it caught up, at most.
 */
export const DELAY_WINDOW_MS = 500;

/**
 * The window's median delay is compared with the threshold: a loop held up turn after turn (work
 * queued faster than it is done), not one long pause (a collection, a big document compiled,
 * which a high percentile of a window of some 50 samples would take for overload).
 */
const DELAY_PERCENTILE = 50;

/** The histogram's sampling timer: 10 ms, Node's default and what prom-client's default metrics use. */
const DELAY_RESOLUTION_MS = 10;

/**
 * Why an operation was refused, as `gateway_overload_refusals_total{reason}` says it: its caller
 * (or its address) held its fair share or more while the gateway was overloaded; in flight at the
 * ceiling (`cap`), whoever sent it; or overloaded with nothing in flight to share out.
 */
export const overloadReasons = ['caller_share', 'cap', 'event_loop', 'upstream_queue'] as const;
export type OverloadReason = (typeof overloadReasons)[number];

/**
 * What passes a threshold (each off at 0): the operations in flight, the event loop's delay, the upstream pool's queue.
 */
type Overload = Exclude<OverloadReason, 'caller_share'>;

/** Operations in flight at most with no cap (SHED_MAX_IN_FLIGHT=0): what bounds the per-caller counts then. */
const CEILING_WITHOUT_CAP = 100_000;

export interface LoadShedderOptions {
  /** The upstream pool's queue now (upstream.ts: `queuedCalls`). */
  readonly queuedCalls: () => number;
  /** Told of every refusal, for metrics. */
  readonly onRefused: (reason: OverloadReason) => void;
}

/**
 * The gateway's load, process-wide, and whether a new operation is refused for it (503
 * OVERLOADED). It is overloaded when the operations in flight reach the cap, when the event
 * loop's delay over the last window passed its threshold, or when the upstream pool's queue
 * reached its own (operations that each make many calls fill the pool long before the cap).
 * Overloaded, it refuses the callers that hold the most, not whoever comes next (the SRE book's
 * "Handling Overload": per-client shares, the heaviest refused first and cheaply): a new operation
 * is refused when its caller holds its share of the operations in flight or more (of the cap, at
 * most): a caller with a token known to be real by its own, any other by its client address's
 * (traffic/caller-shares.ts), so while one caller holds half the cap or more a caller with
 * nothing in flight is still served. The room those callers get past the cap ends at twice it:
 * from there every new operation is refused. The count goes up as an operation is admitted and
 * down once its answer is out (traffic/in-flight.ts, on every transport); the
 * delay is read every DELAY_WINDOW_MS on an unref'd timer, so checking costs counters and a flag
 * per request while nothing is overloaded. The gauges are read by /metrics whatever the
 * thresholds: they are what an autoscaler watches before shedding starts.
 */
export class LoadShedder {
  #inFlight = 0;
  /** The last window's median delay, in ms. */
  delayMs = 0;
  #lagging = false;
  readonly #shares = new CallerShares();
  readonly #cap: number;
  readonly #ceiling: number;
  readonly #histogram: IntervalHistogram;
  readonly #timer: NodeJS.Timeout;
  readonly #retryAfterSeconds: number;

  constructor(
    readonly settings: LoadSheddingSettings,
    private readonly options: LoadShedderOptions,
  ) {
    const { maxInFlight } = settings;
    this.#ceiling = maxInFlight === 0 ? CEILING_WITHOUT_CAP : 2 * maxInFlight;
    this.#cap = maxInFlight === 0 ? this.#ceiling : maxInFlight;
    this.#retryAfterSeconds = settings.retryAfterSeconds;
    this.#histogram = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS });
    this.#histogram.enable();
    this.#timer = setInterval(() => this.#sample(), DELAY_WINDOW_MS).unref();
  }

  /** Operations admitted whose answer is not yet out (an @defer/@stream one until its last part): the one count. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * The refusal of an operation refused for overload: HTTP 503, code OVERLOADED, and when to try again (`Retry-After`).
   */
  overloaded(): GraphQLError {
    const seconds = this.#retryAfterSeconds;
    return new GraphQLError(`The gateway is overloaded: try again in ${seconds} s.`, {
      extensions: {
        code: 'OVERLOADED',
        retryAfterSeconds: seconds,
        http: { status: 503, headers: { 'Retry-After': String(seconds) } },
      },
    });
  }

  /** Upstream calls waiting for a pool connection. */
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

  /**
   * Why a subscription's event is refused now, counted; undefined when it may run. Events are shed
   * as a class, first: refused whenever the gateway is overloaded, whatever anyone holds.
   */
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
   * Overloaded below the ceiling: the callers at or over their share of what is in flight (the cap
   * at most) are refused. With nothing in flight there is nothing to share out: a loop that lags is
   * held by something else (every operation is refused until a window without lag), but an upstream
   * queue then is no operation's (the calls of operations already over, polling's reads): nobody is
   * refused for it.
   */
  #refusedUnder(overload: Overload, caller: Caller): OverloadReason | undefined {
    const shared = Math.min(this.#cap, this.#inFlight);
    if (shared === 0) return overload === 'event_loop' ? overload : undefined;
    return this.#shares.atShare(caller, shared) ? 'caller_share' : undefined;
  }

  #sample(): void {
    // The histogram's timer was due first: a loop held for a second has recorded it by now.
    // Each sample is the whole interval between the histogram's timer runs: the delay is what is past its resolution.
    this.delayMs = Math.max(0, this.#histogram.percentile(DELAY_PERCENTILE) / 1e6 - DELAY_RESOLUTION_MS);
    this.#histogram.reset();
    this.#lagging = this.settings.eventLoopDelayMs > 0 && this.delayMs > this.settings.eventLoopDelayMs;
  }
}
