import type { Span } from '@opentelemetry/api';
import type { RetryPolicy } from 'cockatiel';
import type { Dispatcher } from 'undici';
import { tokenCheckingOperations } from '../domain/operations.js';
import { exchange, readAnswer } from './answer.js';
import type { AttemptSpans } from './attempt-spans.js';
import type { CallContext, CallSpec, UpstreamAttempt } from './call.js';
import type { CallGuard } from './call-guard.js';
import type { CallCancellation } from './cancellation.js';
import type { UpstreamCircuits } from './circuits.js';
import { errorOf, Failure } from './failures.js';
import { refusalOf } from './in-flight.js';
import type { RetryBudget } from './retry-budget.js';
import type { RetryRules } from './retry-policy.js';
import type { Route } from './routes.js';

/** What every call of a transport shares: made once, read by each call's attempts. */
export interface Shared {
  readonly dispatcher: Dispatcher;
  readonly rules: RetryRules;
  readonly policy: RetryPolicy;
  readonly circuits: UpstreamCircuits | undefined;
  readonly budget: RetryBudget | undefined;
  readonly onAttempt: ((attempt: UpstreamAttempt) => void) | undefined;
  readonly onRetryRefused: (() => void) | undefined;
  /**
   * The upstream answered 2xx to an operation that checks tokens (`tokenCheckingOperations`), with this Authorization.
   */
  readonly onTokenAccepted: ((authorization: string, account?: string) => void) | undefined;
  readonly spans: AttemptSpans;
}

/** An attempt's outcome: the parsed answer, or how it failed. */
type Outcome<T> = { value: T; status: number } | Failure;

/**
 * The attempts of one call, run by cockatiel's retry policy, each through the upstream's breakers
 * (the host's and its operation's) and admitted by the guard. The call settles when the policy
 * gives up, or at once when the call is cancelled during a pause before a retry (cockatiel's pause
 * takes no cancellation). Attempts follow one another, so the one under way keeps its span and
 * start here.
 */
export class Attempts<T> {
  readonly #request: Dispatcher.DispatchOptions & { headers: Record<string, string> };
  readonly #idempotent: boolean;
  #resolve!: (value: T) => void;
  #reject!: (error: unknown) => void;
  #pausing = false;
  /** A retry the budget allowed, not yet sent: given back if it never is. */
  #retryPending = false;
  /** How the last attempt failed: what a retry the open breaker refuses fails as. */
  #lastFailure: Failure | undefined;
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
    const { circuits } = this.shared;
    const { operation } = this.spec;
    // A cancelled call sends nothing more; an open breaker neither; a live call asks its guard (budget, 401).
    // A retry not sent gives its share of the budget back; it fails as its last attempt did (that one was sent).
    if (this.cancellation.aborted) return this.#notRetried(this.classify(this.cancellation.reason));
    if (circuits?.refuses(operation))
      return attempt > 0 ? this.#notRetried(this.#lastFailure!.final()) : circuits.refusal(operation);
    if (attempt > 0 || !this.admitted) {
      const refusal = this.guard?.admit(operation);
      if (refusal !== undefined) return this.#notRetried(refusalOf(refusal));
    }
    this.#retryPending = false;
    this.#attempt = attempt;
    return (circuits === undefined ? this.#send() : circuits.execute(operation, () => this.#send())).then(this.#finish);
  };

  /** A 2xx to an operation that checks tokens accepted the caller's; a login's answer issued one. */
  #tokenAccepted({ value, status }: { value: T; status: number }): void {
    const { onTokenAccepted } = this.shared;
    if (onTokenAccepted === undefined || status >= 300) return;
    const { authorization } = this.context;
    if (authorization !== undefined && tokenCheckingOperations.has(this.spec.operation)) onTokenAccepted(authorization);
    const issued = this.spec.issuesToken?.(value);
    if (issued !== undefined) onTokenAccepted(`Bearer ${issued.token}`, issued.account);
  }

  /** Sends the attempt and reads its answer: the parsed value, or how it failed. */
  async #send(): Promise<Outcome<T>> {
    const { shared, spec } = this;
    if (this.#attempt === 0) shared.budget?.called();
    this.#span = shared.spans.start(spec.operation, this.context.trace, this.#request.headers);
    this.#started = performance.now();
    try {
      return readAnswer(
        spec,
        await exchange(shared.dispatcher, this.#request, this.cancellation),
        shared.rules.statusCodes,
      );
    } catch (error) {
      return this.classify(error);
    }
  }

  /**
   * The attempt counted (guard, metrics, span), once the breakers have counted it too: a retry only with both still
   * closed.
   */
  readonly #finish = (outcome: Outcome<T>): Outcome<T> => {
    const { shared, spec } = this;
    const attempt = this.#attempt;
    let failure = outcome instanceof Failure ? outcome : undefined;
    const status = failure ? failure.status : (outcome as { status: number }).status;
    if (failure?.retryable) {
      // Retried only if a GET, within the call's limit, with its breakers closed and the budget allowing.
      const retried =
        this.#idempotent &&
        attempt < shared.rules.limit &&
        (shared.circuits === undefined || shared.circuits.closed(spec.operation)) &&
        this.#budgetAllows();
      if (retried) {
        this.#retryPending = true;
        this.#lastFailure = failure;
        this.#pauseUntilRetry();
      } else outcome = failure = failure.final();
    }
    this.guard?.settled(spec.operation, failure?.code);
    if (failure === undefined) this.#tokenAccepted(outcome as { value: T; status: number });
    shared.onAttempt?.({
      operation: spec.operation,
      status,
      code: failure?.code,
      durationMs: performance.now() - this.#started,
      retry: attempt > 0,
    });
    shared.spans.end(
      this.#span!,
      spec.operation,
      this.route,
      attempt,
      status,
      failure?.code,
      failure?.retryable === true,
    );
    this.#span = undefined;
    return outcome;
  };

  #notRetried(failure: Failure): Failure {
    if (this.#retryPending) {
      this.#retryPending = false;
      this.shared.budget?.giveBack();
    }
    return failure;
  }

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
    this.#reject(errorOf(this.#notRetried(this.classify(this.cancellation.reason)), this.spec.operation, this.route));
  };

  readonly #settle = (outcome: Outcome<T>) => {
    if (outcome instanceof Failure) this.#reject(errorOf(outcome, this.spec.operation, this.route));
    else this.#resolve(outcome.value);
  };
}

function buildRequest<T>(
  context: CallContext,
  spec: CallSpec<T>,
  method: Dispatcher.HttpMethod,
  path: string,
): Dispatcher.DispatchOptions & { headers: Record<string, string> } {
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
