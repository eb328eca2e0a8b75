import { EventEmitter } from 'node:events';

/**
 * Cancels one upstream call: the timeout, the operation's deadline or the client going away.
 * Its exchange (answer.ts) listens for `abort`, and so does a call pausing before a retry. An
 * EventEmitter, not an AbortController: on Node 20 an AbortSignal, and what it reaches, outlives
 * young-generation GCs (docs/performance.md#measured-reasons).
 */
export class CallCancellation extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
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
      signal.addEventListener('abort', () => {
        for (const call of this) call.abort(signal.reason);
      }, { once: true });
    }
    return super.add(cancellation);
  }
}
