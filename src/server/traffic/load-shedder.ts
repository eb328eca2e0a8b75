import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import type { LoadSheddingSettings } from '../../config.js';
import { refusalBody, refusalType, type EarlyRefusal } from '../http/refusal.js';

/** How often the event loop's delay is read (and its histogram started again). */
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
 * The gateway's load, process-wide, and whether a new operation is refused for it (503
 * OVERLOADED): when the operations in flight reach the cap, or the event loop's delay over the
 * last window passed the threshold. The count goes up as an operation is admitted and down once
 * its answer is out (traffic/load-shedding.ts keeps it); the delay is read every DELAY_WINDOW_MS
 * on an unref'd timer, so checking costs a counter and a flag per request. Both are read by
 * /metrics whatever the thresholds: they are what an autoscaler watches before shedding starts.
 */
export class LoadShedder {
  /** Operations admitted whose answer is not yet out (an @defer/@stream one until its last part). */
  inFlight = 0;
  /** The last window's median delay, in ms. */
  delayMs = 0;
  #lagging = false;
  readonly #cap: number;
  readonly #histogram: IntervalHistogram;
  readonly #timer: NodeJS.Timeout;
  /** The refusal as the HTTP server writes it (made once: it never changes). */
  readonly #early: ReturnType<EarlyRefusal>;
  /** The refusal's body, and the headers a fresh copy of which each yoga refusal gets. */
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    readonly settings: LoadSheddingSettings,
    /** Told of every refusal, for metrics. */
    private readonly onRefused: () => void,
  ) {
    this.#cap = settings.maxInFlight === 0 ? Number.POSITIVE_INFINITY : settings.maxInFlight;
    const seconds = settings.retryAfterSeconds;
    this.body = refusalBody(`The gateway is overloaded: try again in ${seconds} s.`, 'OVERLOADED', { retryAfterSeconds: seconds });
    this.headers = Object.freeze({ 'content-type': refusalType, 'retry-after': String(seconds) });
    this.#early = { status: 503, headers: this.headers, body: this.body };
    this.#histogram = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS });
    this.#histogram.enable();
    this.#timer = setInterval(() => this.#sample(), DELAY_WINDOW_MS).unref();
  }

  /** Whether a new operation is refused now; counts the refusal when it is. */
  refuses(): boolean {
    if (this.inFlight < this.#cap && !this.#lagging) return false;
    this.onRefused();
    return true;
  }

  /** The HTTP server's question before yoga (http-server.ts). */
  readonly refuseEarly: EarlyRefusal = () => (this.refuses() ? this.#early : undefined);

  close(): void {
    clearInterval(this.#timer);
    this.#histogram.disable();
  }

  #sample(): void {
    // The histogram's timer was due first: a loop held for a second has recorded it by now.
    // Each sample is the whole interval between the histogram's timer runs: the delay is what is past its resolution.
    this.delayMs = Math.max(0, this.#histogram.percentile(DELAY_PERCENTILE) / 1e6 - DELAY_RESOLUTION_MS);
    this.#histogram.reset();
    this.#lagging = this.settings.eventLoopDelayMs > 0 && this.delayMs > this.settings.eventLoopDelayMs;
  }
}
