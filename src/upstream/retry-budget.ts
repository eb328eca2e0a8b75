/** How many retries the upstream may get beside the calls (UPSTREAM_RETRY_BUDGET_*; config holds the defaults). */
export interface RetryBudgetSettings {
  /** Retries allowed per call over the window (0.2: at most one retry for five calls). */
  readonly ratio: number;
  /** Retries allowed per second whatever the traffic, so a quiet gateway still retries a blip. */
  readonly minPerSecond: number;
}

/** The window the budget is counted over, in one-second buckets (Linkerd's and Finagle's default). */
const WINDOW_SECONDS = 10;

/**
 * A process-wide retry budget, as Linkerd and Finagle have it: over the last ten seconds, retries
 * may be at most `ratio` of the calls plus `minPerSecond` a second. Retries per call are already
 * capped (two); this caps them across calls, so an upstream answering 503 to everything gets
 * about 1.2 times its traffic, not 3 times. Counted in one-second buckets: two small arrays, no
 * allocation per call. (cockatiel has no budget; no kept library offers one for Node.)
 */
export class RetryBudget {
  readonly #ratio: number;
  readonly #floor: number;
  readonly #calls = new Float64Array(WINDOW_SECONDS);
  readonly #retries = new Float64Array(WINDOW_SECONDS);
  #callSum = 0;
  #retrySum = 0;
  /** The second the newest bucket counts. */
  #second = 0;

  constructor(settings: RetryBudgetSettings) {
    this.#ratio = settings.ratio;
    this.#floor = settings.minPerSecond * WINDOW_SECONDS;
  }

  /** A call's first attempt was sent. */
  called(): void {
    this.#calls[this.#roll()]!++;
    this.#callSum++;
  }

  /** Whether one more retry fits; if it does, it is counted as spent. */
  tryRetry(): boolean {
    const bucket = this.#roll();
    // A hair of tolerance: 0.2 * 15 is 3.0000000000000004 in floating point.
    if (this.#retrySum + 1 > this.#floor + this.#ratio * this.#callSum + 1e-9) return false;
    this.#retries[bucket]!++;
    this.#retrySum++;
    return true;
  }

  /**
   * A retry `tryRetry` allowed was not sent after all (its call was cancelled, the breaker opened,
   * its guard refused it during the pause): it is given back, from the newest second that counted
   * one (its pause may have crossed into the next second).
   */
  giveBack(): void {
    const now = this.#roll();
    for (let i = 0; i < WINDOW_SECONDS; i++) {
      const bucket = (now - i + WINDOW_SECONDS) % WINDOW_SECONDS;
      if (this.#retries[bucket]! <= 0) continue;
      this.#retries[bucket]!--;
      this.#retrySum--;
      return;
    }
  }

  /** The bucket of now, emptying those of the seconds that went by since the last use. */
  #roll(): number {
    const second = Math.floor(performance.now() / 1000);
    const passed = second - this.#second;
    if (passed > 0) {
      for (let i = 1; i <= Math.min(passed, WINDOW_SECONDS); i++) {
        const bucket = (this.#second + i) % WINDOW_SECONDS;
        this.#callSum -= this.#calls[bucket]!;
        this.#retrySum -= this.#retries[bucket]!;
        this.#calls[bucket] = 0;
        this.#retries[bucket] = 0;
      }
      this.#second = second;
    }
    return second % WINDOW_SECONDS;
  }
}
