import { EventEmitter } from 'node:events';
import type { CallTimeout } from './failures.js';

/**
 * Cancels one upstream call: the timeout, the operation's deadline or the client going away.
 * Its exchange (answer.ts) listens for `abort`, and so does a call pausing before a retry. An
 * EventEmitter, not an AbortController: on Node 20 an AbortSignal, and what it reaches, outlives
 * young-generation GCs (docs/performance.md#measured-reasons).
 */
export class CallCancellation extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;
  /**
   * Told once an attempt has a connection of the pool (its exchange's `onRequestStart`): the call's own time starts
   * then.
   */
  onConnected: (() => void) | undefined = undefined;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

/**
 * A call's time, in two parts. Waiting for a connection of the gateway's own pool it may take as
 * long as a call (`timeoutMs`): past that it is cut `queued` (classifyThrown: OVERLOADED, unsent,
 * the gateway's fault and not its route's, so no breaker counts it). Its own `timeoutMs` (retries
 * included) starts once it has a connection, so time queued behind other calls is never charged
 * to the route. The operation's deadline (`remainingMs`) caps both (`deadlineFirst`).
 */
export class CallClock implements CallTimeout {
  aborted = false;
  queued = true;
  deadlineFirst = false;
  #connectedAt = 0;
  #timer: NodeJS.Timeout;

  constructor(
    private readonly cancellation: CallCancellation,
    private readonly timeoutMs: number,
    private readonly remainingMs: () => number | undefined = () => undefined,
  ) {
    this.#timer = this.#start(timeoutMs);
    // One timer a call, as before: a connection only notes its time, and the timer, once due, runs on for what is left
    // of it.
    cancellation.onConnected = () => {
      cancellation.onConnected = undefined;
      this.queued = false;
      this.#connectedAt = performance.now();
    };
  }

  stop(): void {
    clearTimeout(this.#timer);
  }

  #start(limitMs: number): NodeJS.Timeout {
    const remaining = this.remainingMs();
    this.deadlineFirst = remaining !== undefined && remaining < limitMs;
    return setTimeout(this.#due, this.deadlineFirst ? Math.max(1, Math.ceil(remaining!)) : limitMs);
  }

  readonly #due = (): void => {
    const left = this.queued || this.deadlineFirst ? 0 : this.timeoutMs - (performance.now() - this.#connectedAt);
    if (left >= 1) {
      this.#timer = this.#start(left);
      return;
    }
    this.aborted = true;
    this.cancellation.abort(new Error(this.queued ? 'no upstream connection in time' : 'upstream call timed out'));
  };
}

/** What the client going away cancels: a call, or a request's wait on a call it shares. */
export interface Abortable {
  abort(reason: unknown): void;
}

/**
 * The calls of one incoming request in flight, all cancelled when its client goes away. One
 * listener on the request's signal, added on its first call and never removed (it goes with the
 * request): a listener added and removed per call cost more than the rest of the call's set-up.
 */
export class RequestCalls extends Set<Abortable> {
  readonly #signal: AbortSignal | undefined;
  #listening = false;
  /** The caller's scope of shared calls (in-flight.ts), worked out on its first GET. */
  scope: string | undefined;

  constructor(signal: AbortSignal | undefined) {
    super();
    this.#signal = signal;
  }

  override add(cancellation: Abortable): this {
    const signal = this.#signal;
    if (signal?.aborted) cancellation.abort(signal.reason);
    else if (signal !== undefined && !this.#listening) {
      this.#listening = true;
      signal.addEventListener(
        'abort',
        () => {
          for (const call of this) call.abort(signal.reason);
        },
        { once: true },
      );
    }
    return super.add(cancellation);
  }
}
