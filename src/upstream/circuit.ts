import {
  type CircuitBreakerPolicy,
  CircuitState,
  CountBreaker,
  circuitBreaker,
  handleWhen,
  type IBreaker,
} from 'cockatiel';
import { Failure } from './failures.js';

/** When a breaker opens and how long it stays open (the CIRCUIT_BREAKER_* variables; config holds their defaults). */
export interface CircuitSettings {
  /** Share of the last `window` attempts that failed (as its verdict says) at which it opens. */
  readonly failureRatio: number;
  /** Attempts the ratio is taken over: a count, not a time, so it opens as fast at 1 call a second as at 4 000. */
  readonly window: number;
  /** Attempts seen before it may open at all (a fresh process's first failures do not open it alone). */
  readonly minimumCalls: number;
  /** How long it stays open before one probe call is let through. */
  readonly resetMs: number;
}

export type CircuitStateName = 'closed' | 'open' | 'half_open';

/** What a failed attempt says to one breaker: it failed, it worked (an answer), or nothing (it cannot judge it). */
export type Verdict = 'failure' | 'success' | 'nothing';

const stateNames: Record<CircuitState, CircuitStateName> = {
  [CircuitState.Closed]: 'closed',
  [CircuitState.Open]: 'open',
  [CircuitState.HalfOpen]: 'half_open',
  [CircuitState.Isolated]: 'open',
};

/**
 * One circuit breaker: cockatiel's, with a count-based window (CountBreaker). Each attempt goes
 * through `execute` and returns its outcome, a failure as a value; `verdict` says what a failure
 * means to this breaker (circuits.ts). One that says nothing is thrown past cockatiel's count:
 * while closed it counts neither way; for the half-open probe it counts as a failure (cockatiel
 * would close the breaker on an error it does not handle, though the probe learned nothing).
 */
export class UpstreamCircuit {
  readonly #policy: CircuitBreakerPolicy;
  readonly #verdict: (failure: Failure) => Verdict;
  readonly #resetMs: number;
  #openedAt = 0;
  /** Failures that said nothing, thrown by probe calls (those sent while the breaker was not closed). */
  readonly #probeFailures = new WeakSet<Failure>();

  constructor(
    settings: CircuitSettings,
    verdict: (failure: Failure) => Verdict,
    onChange?: (state: CircuitStateName) => void,
  ) {
    this.#verdict = verdict;
    this.#resetMs = settings.resetMs;
    const silentProbe = (error: unknown) => error instanceof Failure && this.#probeFailures.has(error);
    const window = new CountBreaker({
      threshold: settings.failureRatio,
      size: settings.window,
      minimumNumberOfCalls: settings.minimumCalls,
    });
    this.#policy = circuitBreaker(
      handleWhen(silentProbe).orWhenResult((outcome) => outcome instanceof Failure && verdict(outcome) === 'failure'),
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
      failure: (state) =>
        window.failure(state) && !(state === CircuitState.Closed && this.#policy.state === CircuitState.HalfOpen),
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

  /**
   * When a call it refuses now could be sent: once its probe is due; while the probe is out, one
   * period from now (the probe's success lets calls through sooner, its failure opens it again).
   */
  retryAfterMs(): number {
    if (this.#policy.state !== CircuitState.Open) return this.#resetMs;
    return Math.max(0, this.#openedAt + this.#resetMs - Date.now());
  }

  get state(): CircuitStateName {
    return stateNames[this.#policy.state];
  }

  /** Runs one attempt (when `refuses()` said no, in the same tick): open and due, it is the probe. */
  execute<O>(attempt: () => Promise<O>): Promise<O | Failure> {
    const probe = this.#policy.state !== CircuitState.Closed;
    return this.#policy
      .execute(async () => {
        const outcome = await attempt();
        if (outcome instanceof Failure && this.#verdict(outcome) === 'nothing') {
          if (probe) this.#probeFailures.add(outcome);
          throw outcome;
        }
        return outcome;
      })
      .catch((error: unknown) => {
        if (error instanceof Failure) return error;
        throw error;
      });
  }
}
