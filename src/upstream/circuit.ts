import { circuitBreaker, CircuitState, CountBreaker, handleWhen, type CircuitBreakerPolicy, type IBreaker } from 'cockatiel';
import { Failure, isUpstreamFault } from './failures.js';

/** When the breaker opens and how long it stays open (the CIRCUIT_BREAKER_* variables; config holds their defaults). */
export interface CircuitSettings {
  /** Share of the last `window` attempts that failed (isUpstreamFault) at which it opens. */
  readonly failureRatio: number;
  /** Attempts the ratio is taken over: a count, not a time, so it opens as fast at 1 call a second as at 4 000. */
  readonly window: number;
  /** Attempts seen before it may open at all (a fresh process's first failures do not open it alone). */
  readonly minimumCalls: number;
  /** How long it stays open before one probe call is let through. */
  readonly resetMs: number;
}

export type CircuitStateName = 'closed' | 'open' | 'half_open';

const stateNames: Record<CircuitState, CircuitStateName> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half_open',
  [CircuitState.Isolated]: 'open',
};

/**
 * The upstream's circuit breaker, one per process, shared by every request: cockatiel's, with a
 * count-based window (CountBreaker). Each attempt goes through `execute`; an attempt's outcome
 * opens it when it is an upstream fault (5xx, the call's own timeout, no connection). Answers
 * (4xx included) count as successes. A call its caller cut short (client gone, deadline) must be
 * thrown as a Failure: it counts neither way while closed, and as a failure for the half-open
 * probe (cockatiel would close the breaker on an error it does not handle, though the probe
 * learned nothing).
 */
export class UpstreamCircuit {
  readonly #policy: CircuitBreakerPolicy;
  readonly #resetMs: number;
  #openedAt = 0;
  /** Failures thrown by probe calls (those sent while the breaker was not closed). */
  readonly #probeFailures = new WeakSet<Failure>();

  constructor(settings: CircuitSettings, onChange?: (state: CircuitStateName) => void) {
    this.#resetMs = settings.resetMs;
    // Only the probe's own failure: a call sent while the breaker was closed, cut short while it is half-open, says nothing.
    const cutShortProbe = (error: unknown) => error instanceof Failure && this.#probeFailures.has(error);
    const window = new CountBreaker({ threshold: settings.failureRatio, size: settings.window, minimumNumberOfCalls: settings.minimumCalls });
    this.#policy = circuitBreaker(
      handleWhen(cutShortProbe).orWhenResult((outcome) => outcome instanceof Failure && isUpstreamFault(outcome)),
      { halfOpenAfter: settings.resetMs, breaker: this.#probeDecides(window) },
    );
    this.#policy.onBreak(() => (this.#openedAt = Date.now()));
    if (onChange) this.#policy.onStateChange((state) => onChange(stateNames[state]));
  }

  /**
   * The window, except that an attempt sent while closed and failing while the probe is out opens
   * nothing: cockatiel tells the breaker the state the attempt began in (closed), would open it
   * under the probe, and the probe's success would then find it open and close nothing. The
   * failure is still counted in the window (the probe's success empties it).
   */
  #probeDecides(window: CountBreaker): IBreaker {
    return {
      get state() {
        return window.state;
      },
      set state(value) {
        window.state = value;
      },
      success: (state) => window.success(state),
      failure: (state) => window.failure(state) && !(state === CircuitState.Closed && this.#policy.state === CircuitState.HalfOpen),
    };
  }

  /**
   * Whether a call must fail now without being sent: open and not yet due for its probe, or
   * half-open with the probe in flight. (cockatiel would queue calls behind the probe, up to its
   * whole timeout; a gateway in front of a failing upstream should answer at once.)
   */
  refuses(): boolean {
    const state = this.#policy.state;
    if (state === CircuitState.Closed) return false;
    if (state === CircuitState.Open) return Date.now() - this.#openedAt < this.#resetMs;
    return true;
  }

  get state(): CircuitStateName {
    return stateNames[this.#policy.state];
  }

  /** Runs one attempt (when `refuses()` said no, in the same tick): open and due, it is the probe. */
  execute<T>(attempt: () => Promise<T>): Promise<T> {
    if (this.#policy.state === CircuitState.Closed) return this.#policy.execute(attempt);
    return this.#policy.execute(() =>
      attempt().catch((error: unknown) => {
        if (error instanceof Failure) this.#probeFailures.add(error);
        throw error;
      }),
    );
  }
}
