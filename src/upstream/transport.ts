import type { Context, Span } from '@opentelemetry/api';
import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import type { OperationName } from '../domain/operations.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { RetryPolicy } from 'cockatiel';
import { exchange, readAnswer } from './answer.js';
import { AttemptSpans } from './attempt-spans.js';
import type { CallGuard } from './call-guard.js';
import { CallCancellation, RequestCalls } from './cancellation.js';
import type { UpstreamCircuit } from './circuit.js';
import { CIRCUIT_OPEN, type UpstreamErrorCode } from './errors.js';
import { classifyThrown, errorOf, Failure, outcomeOfChange } from './failures.js';
import { InFlightCalls, refusalOf, scopeOf, type Flight } from './in-flight.js';
import type { RetryBudget } from './retry-budget.js';
import { defaultRetryRules, retryPolicyOf, type RetryRules } from './retry-policy.js';
import { fillPath, type Route, type RouteTable } from './routes.js';

export type { CallGuard } from './call-guard.js';

/** What the caller of one incoming request brings to every upstream call it makes. */
export interface CallContext {
  /** The incoming `Authorization` header, forwarded verbatim; the gateway has no token of its own. */
  readonly authorization?: string | undefined;
  readonly requestId: string;
  /** Cancels the call: the client went away. (The operation's deadline reaches calls through the guard.) */
  readonly signal?: AbortSignal | undefined;
  readonly guard?: CallGuard | undefined;
  /** The operation's trace: every attempt's span is a child of it. Without one, each attempt starts a trace. */
  readonly trace?: Context | undefined;
}

export interface CallSpec<T> {
  readonly operation: OperationName;
  readonly params?: Readonly<Record<string, string>>;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  readonly json?: object;
  readonly form?: Readonly<Record<string, string>>;
  /** Schema of a successful body; none means the answer carries no body (204). */
  readonly schema?: z.ZodType<T>;
  /** A successful body that still means "no such resource" (an empty array for an id). */
  readonly notFoundWhen?: (value: T) => boolean;
}

/** The transport bound to one incoming request's context: what operation functions call. */
export interface UpstreamCaller {
  call<T>(spec: CallSpec<T>): Promise<T>;
}

/** One finished attempt, for metrics and call budgets. Never carries headers or bodies. */
export interface UpstreamAttempt {
  readonly operation: OperationName;
  readonly status: number | undefined;
  readonly code: UpstreamErrorCode | undefined;
  readonly durationMs: number;
  readonly retry: boolean;
}

export interface TransportOptions {
  readonly baseUrl: string;
  readonly routes: RouteTable;
  readonly dispatcher: Dispatcher;
  /** Budget of one call, retries and backoff included. */
  readonly timeoutMs: number;
  /** Which failures of a GET are tried again, and after what pause. @default defaultRetryRules (retry-policy.ts) */
  readonly retry?: RetryRules;
  /** The upstream's breaker, shared by the process's calls. None (the readiness probe): never refused, never counted. */
  readonly circuit?: UpstreamCircuit | undefined;
  /** Retries across calls; none: only the per-call limit. */
  readonly budget?: RetryBudget | undefined;
  /** Identical GETs in flight at once, for one caller, share one call (in-flight.ts). */
  readonly dedupe?: boolean | undefined;
  readonly onAttempt?: (attempt: UpstreamAttempt) => void;
  /** A request joined a call already in flight instead of sending its own. */
  readonly onJoined?: () => void;
  /** The retry budget refused a retry. */
  readonly onRetryRefused?: () => void;
  /** Spans of the attempts and the `traceparent` they send (the gateway's; tests pass one without an exporter). */
  readonly tracing: Tracing;
}

/** What every call of a transport shares: made once, read by each call's attempts. */
interface Shared {
  readonly dispatcher: Dispatcher;
  readonly rules: RetryRules;
  readonly policy: RetryPolicy;
  readonly circuit: UpstreamCircuit | undefined;
  readonly budget: RetryBudget | undefined;
  readonly onAttempt: ((attempt: UpstreamAttempt) => void) | undefined;
  readonly onRetryRefused: (() => void) | undefined;
  readonly spans: AttemptSpans;
}

/**
 * Sends one operation to the upstream: fills the route, forwards the caller's token and request
 * id, applies the call's timeout, retries idempotent reads (cockatiel's retry, within a retry
 * budget), sends nothing while the upstream's breaker is open, shares identical GETs in flight,
 * and parses the answer with the operation's schema. It knows HTTP and the contract, never GraphQL.
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
      circuit: options.circuit,
      budget: options.budget,
      onAttempt: options.onAttempt,
      onRetryRefused: options.onRetryRefused,
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
    if (this.#flights !== undefined && route.method === 'GET') return this.#callShared(this.#flights, context, spec, route, path, calls);
    return this.#callOwn(context, spec, route, path, calls);
  }

  /** A call of this request alone: its timeout cut to the operation's deadline, cancelled with its client. */
  async #callOwn<T>(context: CallContext, spec: CallSpec<T>, route: Route, path: string, calls: RequestCalls, admitted = false): Promise<T> {
    // The operation's deadline caps the call's own timeout. One cancellation, one timer and one
    // listener per call, all released when it settles.
    const remaining = context.guard?.remainingMs?.();
    const deadlineFirst = remaining !== undefined && remaining < this.#timeoutMs;
    const cancellation = new CallCancellation();
    const timeout = { aborted: false };
    const timer = setTimeout(
      () => {
        timeout.aborted = true;
        cancellation.abort(new Error('upstream call timed out'));
      },
      deadlineFirst ? Math.max(1, Math.ceil(remaining)) : this.#timeoutMs,
    );
    const callerSignal = context.signal;
    calls.add(cancellation);
    try {
      const retryCodes = this.#shared.rules.errorCodes;
      const classify = (error: unknown) => classifyThrown(error, timeout, deadlineFirst, callerSignal, retryCodes);
      // A change (POST, PATCH, DELETE) is never retried; a failure that may have come after it was sent says so.
      const attempts = new Attempts<T>(this.#shared, context, context.guard, spec, route, path, cancellation, route.method === 'GET' ? classify : (error) => outcomeOfChange(classify(error), error));
      attempts.admitted = admitted;
      return await attempts.run();
    } finally {
      clearTimeout(timer);
      calls.delete(cancellation);
    }
  }

  /**
   * A GET shared with the same caller's identical GETs in flight (in-flight.ts). Each request is
   * admitted by its own guard and waits with its own deadline and client; the call itself runs
   * with the call's timeout, the first request's id and trace, and every waiter as its guard.
   */
  #callShared<T>(flights: InFlightCalls, context: CallContext, spec: CallSpec<T>, route: Route, path: string, calls: RequestCalls): Promise<T> {
    const key = `${spec.operation} ${(calls.scope ??= scopeOf(context.authorization))} ${path}`;
    let flight = flights.find<T>(key);
    const joining = flight !== undefined;
    // An open breaker refuses a new call before its guard is asked (nothing is sent, nothing charged).
    if (!joining && this.#shared.circuit?.refuses()) return Promise.reject(errorOf(circuitOpen, spec.operation, route));
    const refusal = context.signal?.aborted ? 'ABORTED' : context.guard?.admit(spec.operation);
    if (refusal !== undefined) return Promise.reject(errorOf(refusalOf(refusal), spec.operation, route));
    flight ??= flights.open<T>(key, spec.operation, route, this.#timeoutMs);
    if (flight === undefined) {
      // Too many shared calls: this one runs alone, already admitted.
      return this.#callOwn(context, spec, route, path, calls, true);
    }
    const remaining = context.guard?.remainingMs?.();
    const waiting = flight.wait(context.guard, calls, remaining !== undefined && remaining < flight.endsAt - performance.now() ? remaining : undefined);
    if (joining) flights.onJoined?.();
    else this.#fly(flight, context, spec, route, path);
    return waiting;
  }

  /** Sends a shared call: its own timeout, the waiters' guard, the first request's id, token and trace. */
  #fly<T>(flight: Flight<T>, context: CallContext, spec: CallSpec<T>, route: Route, path: string): void {
    const { cancellation } = flight;
    const timeout = { aborted: false };
    const timer = setTimeout(() => {
      timeout.aborted = true;
      cancellation.abort(new Error('upstream call timed out'));
    }, this.#timeoutMs);
    const retryCodes = this.#shared.rules.errorCodes;
    // Cancelled because every waiter left: the attempt reads as the last one's reason (cut short, not the upstream's fault).
    const classify = (error: unknown) => (timeout.aborted ? undefined : flight.left) ?? classifyThrown(error, timeout, false, undefined, retryCodes);
    const attempts = new Attempts<T>(this.#shared, context, flight, spec, route, path, cancellation, classify);
    attempts.admitted = true;
    attempts.run().then(
      (value) => {
        clearTimeout(timer);
        flight.resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        flight.reject(error);
      },
    );
  }
}

/** What an open breaker answers: UPSTREAM_UNAVAILABLE, nothing sent, safe to retry. */
const circuitOpen = new Failure('UPSTREAM_UNAVAILABLE', undefined, false, { reason: CIRCUIT_OPEN });

/** An attempt's outcome: the parsed answer, or how it failed. */
type Outcome<T> = { value: T; status: number } | Failure;

/**
 * The attempts of one call, run by cockatiel's retry policy, each through the upstream's breaker
 * and admitted by the guard. The call settles when the policy gives up, or at once when the call
 * is cancelled during a pause before a retry (cockatiel's pause takes no cancellation). Attempts
 * follow one another, so the one under way keeps its span and start here.
 */
class Attempts<T> {
  readonly #request: Dispatcher.DispatchOptions & { headers: Record<string, string> };
  readonly #idempotent: boolean;
  #resolve!: (value: T) => void;
  #reject!: (error: unknown) => void;
  #pausing = false;
  #attempt = 0;
  #span: Span | undefined;
  #started = 0;
  /** The first attempt was admitted before the call began (a shared call's waiters were). */
  admitted = false;

  constructor(
    private readonly shared: Shared,
    private readonly context: CallContext,
    private readonly guard: CallGuard | undefined,
    private readonly spec: CallSpec<T>,
    private readonly route: Route,
    path: string,
    private readonly cancellation: CallCancellation,
    private readonly classify: (error: unknown) => Failure,
  ) {
    this.#request = buildRequest(context, spec, route.method, path);
    this.#idempotent = route.method === 'GET';
  }

  run(): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
      this.shared.policy.execute(this.#next).then(this.#settle, reject);
    });
  }

  readonly #next = ({ attempt }: { attempt: number }): Outcome<T> | Promise<Outcome<T>> => {
    if (this.#pausing) {
      this.#pausing = false;
      this.cancellation.off('abort', this.#cancelPause);
    }
    const { circuit } = this.shared;
    // A cancelled call sends nothing more; an open breaker neither; a live call asks its guard (budget, 401).
    if (this.cancellation.aborted) return this.classify(this.cancellation.reason);
    if (circuit?.refuses()) return circuitOpen;
    if (attempt > 0 || !this.admitted) {
      const refusal = this.guard?.admit(this.spec.operation);
      if (refusal !== undefined) return refusalOf(refusal);
    }
    this.#attempt = attempt;
    if (circuit === undefined) return this.#send().then(this.#finish);
    return circuit.execute(this.#sendThroughBreaker).then(this.#finish, this.#finishThrown);
  };

  /** Sends the attempt and reads its answer: the parsed value, or how it failed. */
  async #send(): Promise<Outcome<T>> {
    const { shared, spec } = this;
    if (this.#attempt === 0) shared.budget?.called();
    this.#span = shared.spans.start(spec.operation, this.context.trace, this.#request.headers);
    this.#started = performance.now();
    try {
      const { status, body } = await exchange(shared.dispatcher, this.#request, this.cancellation);
      return readAnswer(spec, status, body, shared.rules.statusCodes);
    } catch (error) {
      return this.classify(error);
    }
  }

  /** A failure its caller cut short is thrown to the breaker, which then counts it neither way (circuit.ts). */
  readonly #sendThroughBreaker = async (): Promise<Outcome<T>> => {
    const outcome = await this.#send();
    if (outcome instanceof Failure && outcome.extra.cutShort) throw outcome;
    return outcome;
  };

  readonly #finishThrown = (error: unknown): Outcome<T> => {
    if (error instanceof Failure) return this.#finish(error);
    throw error;
  };

  /** The attempt counted (guard, metrics, span), once the breaker has counted it too: a retry only with the breaker still closed. */
  readonly #finish = (outcome: Outcome<T>): Outcome<T> => {
    const { shared, spec } = this;
    const attempt = this.#attempt;
    let failure = outcome instanceof Failure ? outcome : undefined;
    const status = failure ? failure.status : (outcome as { status: number }).status;
    if (failure?.retryable) {
      // Retried only if a GET, within the call's limit, with the breaker closed and the budget allowing.
      const retried = this.#idempotent && attempt < shared.rules.limit && (shared.circuit === undefined || shared.circuit.state === 'closed') && this.#budgetAllows();
      if (retried) this.#pauseUntilRetry();
      else outcome = failure = failure.final();
    }
    this.guard?.settled(spec.operation, failure?.code);
    shared.onAttempt?.({ operation: spec.operation, status, code: failure?.code, durationMs: performance.now() - this.#started, retry: attempt > 0 });
    shared.spans.end(this.#span!, spec.operation, this.route, attempt, status, failure?.code, failure?.retryable === true);
    this.#span = undefined;
    return outcome;
  };

  #budgetAllows(): boolean {
    const { budget } = this.shared;
    if (budget === undefined || budget.tryRetry()) return true;
    this.shared.onRetryRefused?.();
    return false;
  }

  /** The call's cancellation ends the pause before a retry: the call fails at once, not after the pause. */
  #pauseUntilRetry(): void {
    this.#pausing = true;
    this.cancellation.once('abort', this.#cancelPause);
  }

  readonly #cancelPause = () => {
    this.#pausing = false;
    this.#reject(errorOf(this.classify(this.cancellation.reason), this.spec.operation, this.route));
  };

  readonly #settle = (outcome: Outcome<T>) => {
    if (outcome instanceof Failure) this.#reject(errorOf(outcome, this.spec.operation, this.route));
    else this.#resolve(outcome.value);
  };
}

function buildRequest<T>(context: CallContext, spec: CallSpec<T>, method: Dispatcher.HttpMethod, path: string): Dispatcher.DispatchOptions & { headers: Record<string, string> } {
  const headers: Record<string, string> = { 'x-request-id': context.requestId };
  if (method === 'GET' || spec.schema !== undefined) headers.accept = 'application/json';
  if (context.authorization !== undefined) headers.authorization = context.authorization;
  let body: string | undefined;
  if (spec.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(spec.json);
  } else if (spec.form !== undefined) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(spec.form).toString();
  }
  return { method, path, headers, body };
}

function queryString(query: CallSpec<unknown>['query']): string {
  if (query === undefined) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.append(name, String(value));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
