import type { Dispatcher } from 'undici';
import type { Tracing } from '../telemetry/tracing.js';
import { AttemptSpans } from './attempt-spans.js';
import { Attempts, type Shared } from './attempts.js';
import type { CallContext, CallSpec, UpstreamAttempt, UpstreamCaller } from './call.js';
import { CallCancellation, CallClock, RequestCalls } from './cancellation.js';
import type { UpstreamCircuits } from './circuits.js';
import { classifyThrown, errorOf, outcomeOfChange } from './failures.js';
import { type Flight, InFlightCalls, refusalOf, scopeOf } from './in-flight.js';
import type { RetryBudget } from './retry-budget.js';
import { defaultRetryRules, type RetryRules, retryPolicyOf } from './retry-policy.js';
import { fillPath, type Route, type RouteTable } from './routes.js';

export type { CallContext, CallSpec, UpstreamAttempt, UpstreamCaller } from './call.js';
export type { CallGuard } from './call-guard.js';

export interface TransportOptions {
  readonly baseUrl: string;
  readonly routes: RouteTable;
  readonly dispatcher: Dispatcher;
  /** Budget of one call, retries and backoff included. */
  readonly timeoutMs: number;
  /** Which failures of a GET are tried again, and after what pause. @default defaultRetryRules (retry-policy.ts) */
  readonly retry?: RetryRules;
  /**
   * The upstream's breakers (the host's and one per operation), shared by the process's calls. None (the readiness
   * probe): never refused, never counted.
   */
  readonly circuits?: UpstreamCircuits | undefined;
  /** Retries across calls; none: only the per-call limit. */
  readonly budget?: RetryBudget | undefined;
  /** Identical GETs in flight at once, for one caller, share one call (in-flight.ts). */
  readonly dedupe?: boolean | undefined;
  readonly onAttempt?: (attempt: UpstreamAttempt) => void;
  /** A request joined a call already in flight instead of sending its own. */
  readonly onJoined?: () => void;
  /** The retry budget refused a retry. */
  readonly onRetryRefused?: () => void;
  /**
   * The upstream accepted a caller's token (it answered 2xx to an operation the contract says checks
   * one), or issued one to `account` (login): the gateway's known tokens.
   */
  readonly onTokenAccepted?: (authorization: string, account?: string) => void;
  /** Spans of the attempts and the `traceparent` they send (the gateway's; tests pass one without an exporter). */
  readonly tracing: Tracing;
}

/**
 * Sends one operation to the upstream: fills the route, forwards the caller's token and request
 * id, applies the call's timeout, retries idempotent reads (cockatiel's retry, within a retry
 * budget), sends nothing while the host's or the operation's breaker is open, shares identical
 * GETs in flight, and parses the answer with the operation's schema. It knows HTTP and the
 * contract, never GraphQL.
 */
export class UpstreamTransport {
  readonly #basePath: string;
  readonly #routes: RouteTable;
  readonly #timeoutMs: number;
  readonly #shared: Shared;
  readonly #flights: InFlightCalls | undefined;

  constructor(options: TransportOptions) {
    this.#basePath = new URL(options.baseUrl).pathname.replace(/\/+$/, '');
    this.#routes = options.routes;
    this.#timeoutMs = options.timeoutMs;
    const rules = options.retry ?? defaultRetryRules;
    this.#shared = {
      dispatcher: options.dispatcher,
      rules,
      policy: retryPolicyOf(rules),
      circuits: options.circuits,
      budget: options.budget,
      onAttempt: options.onAttempt,
      onRetryRefused: options.onRetryRefused,
      onTokenAccepted: options.onTokenAccepted,
      spans: new AttemptSpans(options.tracing, options.routes),
    };
    this.#flights = options.dedupe ? new InFlightCalls(options.onJoined) : undefined;
  }

  forRequest(context: CallContext): UpstreamCaller {
    const calls = new RequestCalls(context.signal);
    return { call: (spec) => this.call(context, spec, calls) };
  }

  call<T>(context: CallContext, spec: CallSpec<T>, calls: RequestCalls = new RequestCalls(context.signal)): Promise<T> {
    const route = this.#routes[spec.operation];
    let path: string;
    try {
      path = this.#basePath + fillPath(route, spec.params) + queryString(spec.query);
    } catch (error) {
      // A call always answers with a promise, a malformed one too.
      return Promise.reject(error);
    }
    const flights = this.#flights;
    if (flights === undefined) return this.#callOwn(context, spec, route, path, calls);
    if (route.method === 'GET') return this.#callShared(flights, context, spec, route, path, calls);
    // A change: a GET in flight may have been read before it. No read joins one of those once the
    // change is sent, nor once it is answered (a read that began then must see the change).
    flights.detachAll();
    return this.#callOwn(context, spec, route, path, calls).finally(() => flights.detachAll());
  }

  /**
   * A call of this request alone: cancelled with its client, timed by its CallClock (the pool's wait, then its own
   * time, capped by the operation's deadline).
   */
  async #callOwn<T>(
    context: CallContext,
    spec: CallSpec<T>,
    route: Route,
    path: string,
    calls: RequestCalls,
    admitted = false,
  ): Promise<T> {
    // One cancellation, a timer at a time and one listener per call, all released when it settles.
    const cancellation = new CallCancellation();
    const timeout = new CallClock(cancellation, this.#timeoutMs, () => context.guard?.remainingMs?.());
    const callerSignal = context.signal;
    calls.add(cancellation);
    try {
      const retryCodes = this.#shared.rules.errorCodes;
      const classify = (error: unknown) => classifyThrown(error, timeout, callerSignal, retryCodes);
      // A change (POST, PATCH, DELETE) is never retried; a failure that may have come after it was sent says so.
      const attempts = new Attempts<T>(
        this.#shared,
        context,
        context.guard,
        spec,
        route,
        path,
        cancellation,
        route.method === 'GET' ? classify : (error) => outcomeOfChange(classify(error), error),
      );
      attempts.admitted = admitted;
      return await attempts.run();
    } finally {
      timeout.stop();
      calls.delete(cancellation);
    }
  }

  /**
   * A GET shared with the same caller's identical GETs in flight (in-flight.ts). Each request is
   * admitted by its own guard and waits with its own deadline and client; the call itself runs
   * with the call's timeout, the first request's id and trace, and every waiter as its guard.
   */
  #callShared<T>(
    flights: InFlightCalls,
    context: CallContext,
    spec: CallSpec<T>,
    route: Route,
    path: string,
    calls: RequestCalls,
  ): Promise<T> {
    calls.scope ??= scopeOf(context.authorization);
    const key = `${spec.operation} ${calls.scope} ${path}`;
    let flight = flights.find<T>(key);
    const joining = flight !== undefined;
    // An open breaker refuses a new call before its guard is asked (nothing is sent, nothing charged).
    const { circuits } = this.#shared;
    if (!joining && circuits?.refuses(spec.operation))
      return Promise.reject(errorOf(circuits.refusal(spec.operation), spec.operation, route));
    // Joined during a retry's pause: charged (by the flight's guard) only when the retry is sent.
    const admitNow = flight === undefined || flight.attempting;
    const refusal = context.signal?.aborted ? 'ABORTED' : admitNow ? context.guard?.admit(spec.operation) : undefined;
    if (refusal !== undefined) return Promise.reject(errorOf(refusalOf(refusal), spec.operation, route));
    flight ??= flights.open<T>(key, spec.operation, route, this.#timeoutMs);
    if (flight === undefined) {
      // Too many shared calls: this one runs alone, already admitted.
      return this.#callOwn(context, spec, route, path, calls, true);
    }
    const remaining = context.guard?.remainingMs?.();
    const waiting = flight.wait(
      context.guard,
      calls,
      remaining !== undefined && remaining < flight.endsAt - performance.now() ? remaining : undefined,
      admitNow,
    );
    if (joining) flights.onJoined?.();
    else this.#fly(flight, context, spec, route, path);
    return waiting;
  }

  /** Sends a shared call: its own timeout, the waiters' guard, the first request's id, token and trace. */
  #fly<T>(flight: Flight<T>, context: CallContext, spec: CallSpec<T>, route: Route, path: string): void {
    const { cancellation } = flight;
    const timeout = new CallClock(cancellation, this.#timeoutMs);
    const retryCodes = this.#shared.rules.errorCodes;
    // Cancelled because every waiter left: the attempt reads as the last one's reason (cut short, not the upstream's
    // fault).
    const classify = (error: unknown) =>
      (timeout.aborted ? undefined : flight.left) ?? classifyThrown(error, timeout, undefined, retryCodes);
    const attempts = new Attempts<T>(this.#shared, context, flight, spec, route, path, cancellation, classify);
    attempts.admitted = true;
    attempts.run().then(
      (value) => {
        timeout.stop();
        flight.resolve(value);
      },
      (error: unknown) => {
        timeout.stop();
        flight.reject(error);
      },
    );
  }
}

function queryString(query: CallSpec<unknown>['query']): string {
  if (query === undefined) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.append(name, String(value));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
