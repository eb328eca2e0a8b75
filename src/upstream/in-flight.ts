import type { OperationName } from '../domain/operations.js';
import type { CallGuard } from './call-guard.js';
import { type Abortable, CallCancellation, type RequestCalls } from './cancellation.js';
import { credentialKeyOf } from './credential.js';
import type { UpstreamErrorCode } from './errors.js';
import { errorOf, Failure } from './failures.js';
import type { Route } from './routes.js';

/**
 * Shared calls tracked at once. Entries live only while their call is in flight, so the map holds
 * at most the GETs in flight (a few hundred at the busiest); past this bound new calls simply run
 * unshared.
 */
export const MAX_SHARED_CALLS = 10_000;

/**
 * The scope of a caller's shared calls: a hash of its normalised credential (never the token
 * itself), or `-` for calls without one, which share among themselves. Different tokens never
 * share an answer, even one the upstream would give to both: it is theirs to decide.
 */
export function scopeOf(authorization: string | undefined): string {
  return credentialKeyOf(authorization) ?? '-';
}

/** A refusal by a waiter's own guard, as the failure it reads. */
export function refusalOf(code: UpstreamErrorCode): Failure {
  return new Failure(
    code,
    undefined,
    false,
    code === 'UPSTREAM_TIMEOUT' ? { reason: 'operation deadline', cutShort: true } : { cutShort: true },
  );
}

/** One request waiting on a shared call: its own guard, deadline and client, its own promise. */
class Waiter<T> implements Abortable {
  timer: NodeJS.Timeout | undefined;

  constructor(
    readonly flight: Flight<T>,
    readonly guard: CallGuard | undefined,
    readonly calls: RequestCalls,
    readonly resolve: (value: T) => void,
    readonly reject: (error: unknown) => void,
    /** Charged for the attempt under way: settled when it ends, or when this waiter leaves. */
    public admitted: boolean,
  ) {}

  /** The client went away: this waiter leaves; the call goes on for the others. */
  abort(reason: unknown): void {
    this.flight.leave(this, new Failure('ABORTED', undefined, false, { cause: reason, cutShort: true }));
  }

  release(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.calls.delete(this);
  }
}

/**
 * One upstream GET shared by the requests that asked for it while it was in flight. It is their
 * guard for the call's attempts: a waiter is charged once per attempt (a joiner when it joins, as
 * if it had sent the attempt itself), settled when the attempt ends, and one whose guard refuses a
 * retry leaves with that refusal, as it would have failed alone. A waiter that leaves (client gone,
 * deadline) gets its own failure at once; the call is cancelled only when the last one leaves, or
 * by its own timeout.
 */
export class Flight<T> implements CallGuard {
  readonly cancellation = new CallCancellation();
  /** Why the last waiter left: what the cancelled call's attempt is classified as. */
  left: Failure | undefined;
  /**
   * An attempt is under way (the first one from the start): a request joining now is charged for
   * it. Between attempts (a retry's pause) a joiner is charged only if the next one is sent.
   */
  attempting = true;
  /** When the call's own timeout ends it (performance.now()). */
  readonly endsAt: number;
  #waiters: Waiter<T>[] = [];
  #done = false;

  constructor(
    readonly key: string,
    readonly operation: OperationName,
    readonly route: Route,
    timeoutMs: number,
    readonly onDone: (flight: Flight<T>) => void,
  ) {
    this.endsAt = performance.now() + timeoutMs;
  }

  /**
   * A request's wait on this call (already admitted by its guard); `deadlineMs` if its deadline comes before the call's
   * timeout.
   */
  wait(
    guard: CallGuard | undefined,
    calls: RequestCalls,
    deadlineMs: number | undefined,
    admitted: boolean,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiter = new Waiter(this, guard, calls, resolve, reject, admitted);
      this.#waiters.push(waiter);
      if (deadlineMs !== undefined) {
        waiter.timer = setTimeout(
          () => this.leave(waiter, refusalOf('UPSTREAM_TIMEOUT')),
          Math.max(1, Math.ceil(deadlineMs)),
        );
      }
      // Last: a client already gone leaves at once.
      calls.add(waiter);
    });
  }

  admit(operation: OperationName): UpstreamErrorCode | undefined {
    let refusal: UpstreamErrorCode | undefined;
    // Backwards: a waiter refused leaves the array.
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      const waiter = this.#waiters[i]!;
      if (waiter.admitted) continue;
      const code = waiter.guard?.admit(operation);
      if (code === undefined) waiter.admitted = true;
      else {
        refusal = code;
        this.leave(waiter, refusalOf(code));
      }
    }
    if (this.#waiters.length === 0) return refusal ?? 'ABORTED';
    this.attempting = true;
    return undefined;
  }

  settled(operation: OperationName, code: UpstreamErrorCode | undefined): void {
    this.attempting = false;
    for (const waiter of this.#waiters) {
      if (!waiter.admitted) continue;
      waiter.admitted = false;
      waiter.guard?.settled(operation, code);
    }
  }

  leave(waiter: Waiter<T>, failure: Failure): void {
    const at = this.#waiters.indexOf(waiter);
    if (at === -1) return;
    this.#waiters.splice(at, 1);
    waiter.release();
    if (waiter.admitted) waiter.guard?.settled(this.operation, failure.code);
    waiter.reject(errorOf(failure, this.operation, this.route));
    if (this.#waiters.length === 0) {
      this.left = failure;
      this.#finish();
      this.cancellation.abort(failure);
    }
  }

  resolve(value: T): void {
    const waiters = this.#finish();
    for (const waiter of waiters) {
      waiter.release();
      waiter.resolve(value);
    }
  }

  reject(error: unknown): void {
    const waiters = this.#finish();
    for (const waiter of waiters) {
      waiter.release();
      waiter.reject(error);
    }
  }

  #finish(): Waiter<T>[] {
    const waiters = this.#waiters;
    this.#waiters = [];
    if (!this.#done) {
      this.#done = true;
      this.onDone(this);
    }
    return waiters;
  }
}

/** The shared calls in flight, by operation, caller scope and path. */
export class InFlightCalls {
  readonly #flights = new Map<string, Flight<unknown>>();
  readonly #remove = (flight: Flight<unknown>) => {
    if (this.#flights.get(flight.key) === flight) this.#flights.delete(flight.key);
  };

  /** Counts a request that joined a call already in flight. */
  constructor(readonly onJoined?: () => void) {}

  /** No request joins the calls in flight now: they go on for their waiters, and new GETs start their own. */
  detachAll(): void {
    this.#flights.clear();
  }

  find<T>(key: string): Flight<T> | undefined {
    return this.#flights.get(key) as Flight<T> | undefined;
  }

  /** A new shared call under `key`, or undefined when the map is full (the call then runs unshared). */
  open<T>(key: string, operation: OperationName, route: Route, timeoutMs: number): Flight<T> | undefined {
    if (this.#flights.size >= MAX_SHARED_CALLS) return undefined;
    const flight = new Flight<T>(key, operation, route, timeoutMs, this.#remove as (flight: Flight<T>) => void);
    this.#flights.set(key, flight as Flight<unknown>);
    return flight;
  }
}
