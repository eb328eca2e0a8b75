import type { Context } from '@opentelemetry/api';
import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import type { OperationName } from '../domain/operations.js';
import type { Tracing } from '../telemetry/tracing.js';
import { exchange, readAnswer } from './answer.js';
import { AttemptSpans } from './attempt-spans.js';
import { CallCancellation, RequestCalls } from './cancellation.js';
import { UpstreamError, type UpstreamErrorCode } from './errors.js';
import { classifyThrown, Failure, outcomeOfChange } from './failures.js';
import { backoffMs, defaultRetryPolicy, type RetryPolicy } from './retry-policy.js';
import { fillPath, type Route, type RouteTable } from './routes.js';

/**
 * A per-operation gate on upstream calls (budget, stop after a 401). The transport asks it
 * before every attempt, retries included, and tells it how each attempt ended.
 */
export interface CallGuard {
  /** A code refuses the attempt: it is not sent. */
  admit(operation: OperationName): UpstreamErrorCode | undefined;
  settled(operation: OperationName, code: UpstreamErrorCode | undefined): void;
  /**
   * Milliseconds left before the operation's deadline, if it has one: a call's timeout is cut to
   * it, and a call the deadline cuts fails as UPSTREAM_TIMEOUT ("operation deadline").
   */
  remainingMs?(): number;
}

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
  /** Which failures of a GET are tried again, and after what pause. @default defaultRetryPolicy (retry-policy.ts) */
  readonly retry?: RetryPolicy;
  readonly onAttempt?: (attempt: UpstreamAttempt) => void;
  /** Spans of the attempts and the `traceparent` they send (the gateway's; tests pass one without an exporter). */
  readonly tracing: Tracing;
}

/**
 * Sends one operation to the upstream: fills the route, forwards the caller's token and request
 * id, applies the call's timeout, retries idempotent reads, and parses the answer with the
 * operation's schema. It knows HTTP and the contract, never GraphQL.
 */
export class UpstreamTransport {
  readonly #basePath: string;
  readonly #routes: RouteTable;
  readonly #dispatcher: Dispatcher;
  readonly #timeoutMs: number;
  readonly #retry: RetryPolicy;
  readonly #onAttempt: ((attempt: UpstreamAttempt) => void) | undefined;
  readonly #spans: AttemptSpans;

  constructor(options: TransportOptions) {
    this.#basePath = new URL(options.baseUrl).pathname.replace(/\/+$/, '');
    this.#routes = options.routes;
    this.#dispatcher = options.dispatcher;
    this.#timeoutMs = options.timeoutMs;
    this.#retry = options.retry ?? defaultRetryPolicy;
    this.#onAttempt = options.onAttempt;
    this.#spans = new AttemptSpans(options.tracing, options.routes);
  }

  forRequest(context: CallContext): UpstreamCaller {
    const calls = new RequestCalls(context.signal);
    return { call: (spec) => this.call(context, spec, calls) };
  }

  async call<T>(context: CallContext, spec: CallSpec<T>, calls: RequestCalls = new RequestCalls(context.signal)): Promise<T> {
    const route = this.#routes[spec.operation];
    const path = this.#basePath + fillPath(route, spec.params) + queryString(spec.query);
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
      const classify = (error: unknown) => classifyThrown(error, timeout, deadlineFirst, callerSignal, this.#retry);
      // A change (POST, PATCH, DELETE) is never retried; a failure that may have come after it was sent says so.
      return await this.#send(context, spec, route, path, cancellation, route.method === 'GET' ? classify : (error) => outcomeOfChange(classify(error), error));
    } finally {
      clearTimeout(timer);
      calls.delete(cancellation);
    }
  }

  /** The attempts of one call: retries of idempotent reads, each admitted by the guard. */
  async #send<T>(context: CallContext, spec: CallSpec<T>, route: Route, path: string, cancellation: CallCancellation, classify: (error: unknown) => Failure): Promise<T> {
    const request = this.#buildRequest(context, spec, route.method, path);
    const idempotent = route.method === 'GET';
    const fail = (failure: Failure) =>
      new UpstreamError({ code: failure.code, operation: spec.operation, method: route.method, path: route.path, status: failure.status, ...failure.extra });

    for (let attempt = 0; ; attempt++) {
      // A cancelled operation sends nothing more; a live one asks its guard (budget, 401).
      const refusal = cancellation.aborted ? classify(cancellation.reason).code : context.guard?.admit(spec.operation);
      if (refusal !== undefined) throw fail(new Failure(refusal, undefined, false, refusal === 'UPSTREAM_TIMEOUT' ? { reason: 'operation deadline' } : {}));
      const span = this.#spans.start(spec.operation, context.trace, request.headers);
      const started = performance.now();
      const outcome = await this.#attempt(request, cancellation, spec).catch(classify);
      const failure = outcome instanceof Failure ? outcome : undefined;
      const status = failure ? failure.status : (outcome as { status: number }).status;
      const retried = failure !== undefined && idempotent && failure.retryable && attempt < this.#retry.limit;
      context.guard?.settled(spec.operation, failure?.code);
      this.#onAttempt?.({ operation: spec.operation, status, code: failure?.code, durationMs: performance.now() - started, retry: attempt > 0 });
      this.#spans.end(span, spec.operation, route, attempt, status, failure?.code, retried);
      if (!failure) return (outcome as { value: T }).value;
      if (!retried) throw fail(failure);
      // The retry lives inside the call's timeout: sleeping past it would only delay the failure.
      if (!(await cancellation.pause(backoffMs(this.#retry, attempt)))) throw fail(classify(cancellation.reason));
    }
  }

  #buildRequest<T>(context: CallContext, spec: CallSpec<T>, method: Dispatcher.HttpMethod, path: string): Dispatcher.DispatchOptions & { headers: Record<string, string> } {
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

  async #attempt<T>(request: Dispatcher.DispatchOptions, cancellation: CallCancellation, spec: CallSpec<T>): Promise<{ value: T; status: number } | Failure> {
    const { status, body } = await exchange(this.#dispatcher, request, cancellation);
    return readAnswer(spec, status, body, this.#retry.statusCodes);
  }
}

function queryString(query: CallSpec<unknown>['query']): string {
  if (query === undefined) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.append(name, String(value));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
