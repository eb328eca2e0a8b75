import { EventEmitter } from 'node:events';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Context, type Span } from '@opentelemetry/api';
import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import { createTracing, semconv, spanAttributes, type Tracing } from '../telemetry/tracing.js';
import { checkBody } from './body-check.js';
import { codeForStatus, UpstreamError, type UpstreamErrorCode } from './errors.js';
import { fillPath, type Route, type RouteTable } from './routes.js';
import { type OperationName } from '../domain/operations.js';
import { validationErrorSchema } from './schemas.js';
import { Pool } from './undici-pool.js';

/** Retry policy of idempotent reads; data normalised once rather than literals in the loop. */
export interface RetryPolicy {
  /** Retries after the first attempt. @default 2 */
  readonly limit: number;
  /** Statuses that say "try again", for GETs only. @default [502, 503, 504] */
  readonly statusCodes: readonly number[];
  /** Connection failures worth a second try: refused, reset, closed under us. */
  readonly errorCodes: readonly string[];
  /** First backoff; doubled per retry, then jittered by ±50 %. @default 25 */
  readonly baseDelayMs: number;
  /** Upper bound of one backoff. @default 250 */
  readonly maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = Object.freeze({
  limit: 2,
  statusCodes: [502, 503, 504],
  errorCodes: ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED'],
  baseDelayMs: 25,
  maxDelayMs: 250,
});

/** Connection failures that mean "nobody answered" rather than "the answer was bad". */
const unavailableCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED', 'UND_ERR_CONNECT_TIMEOUT']);
const timeoutCodes = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/**
 * Failures that leave no doubt the request was never sent: no connection was made (refused, no
 * route, no name, connect timeout) or the pool was closed. Anything else may come after the
 * request was written (a reset, the socket closed under a sent request, no answer in time).
 */
const neverSentCodes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED']);

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
  readonly retry?: RetryPolicy;
  readonly onAttempt?: (attempt: UpstreamAttempt) => void;
  /** Spans of the attempts and the `traceparent` they send (the gateway's; tests pass one without an exporter). */
  readonly tracing: Tracing;
}

export interface DispatcherOptions {
  readonly baseUrl: string;
  readonly connections: number;
  /** Shorter than the upstream's own keep-alive, so we never send on a socket it is closing. */
  readonly keepAliveTimeoutMs?: number;
  readonly maxResponseBytes?: number;
}

/** Below the 5 s keep-alive common on upstream servers (and the reference upstream's). */
const DEFAULT_KEEPALIVE_MS = 4_000;

/** One pool per process: keep-alive connections to the upstream's origin, shared by all requests. */
export function createUpstreamDispatcher(options: DispatcherOptions): Pool {
  return new Pool(new URL(options.baseUrl).origin, {
    connections: options.connections,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? DEFAULT_KEEPALIVE_MS,
    keepAliveMaxTimeout: options.keepAliveTimeoutMs ?? DEFAULT_KEEPALIVE_MS,
    maxResponseSize: options.maxResponseBytes ?? -1,
  });
}

/**
 * Cancels one upstream call: the timeout, the operation's deadline or the client going away.
 * Its exchange (`exchange` below) and its retry pause listen for `abort`. An EventEmitter, not an
 * AbortController: on Node 20 an AbortSignal, and what it reaches (undici's request and handler,
 * our closures), tends to survive young-generation GCs and is freed only by a full GC. Measured
 * on `head(id)`: the signals were 13 % of the garbage promoted to the old space.
 */
class CallCancellation extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }

  /** Waits `ms`; false at once if the call is cancelled first. */
  pause(ms: number): Promise<boolean> {
    if (this.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const stop = () => {
        clearTimeout(timer);
        resolve(false);
      };
      const timer = setTimeout(() => {
        this.off('abort', stop);
        resolve(true);
      }, ms);
      this.once('abort', stop);
    });
  }
}

/**
 * The calls of one incoming request in flight, all cancelled when its client goes away. One
 * listener on the request's signal, added on its first call and never removed (it goes with the
 * request): a listener added and removed per call cost more than the rest of the call's set-up.
 */
class RequestCalls extends Set<CallCancellation> {
  readonly #signal: AbortSignal | undefined;
  #listening = false;

  constructor(signal: AbortSignal | undefined) {
    super();
    this.#signal = signal;
  }

  override add(cancellation: CallCancellation): this {
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

class Failure {
  constructor(
    readonly code: UpstreamErrorCode,
    readonly status: number | undefined,
    readonly retryable: boolean,
    readonly extra: { details?: UpstreamError['details']; reason?: string; cause?: unknown } = {},
  ) {}
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
  readonly #tracing: Tracing;
  /** Per operation, its attempts' span name: method and route template (never a filled path). */
  readonly #spanNames: Readonly<Record<OperationName, string>>;

  constructor(options: TransportOptions) {
    this.#basePath = new URL(options.baseUrl).pathname.replace(/\/+$/, '');
    this.#routes = options.routes;
    this.#dispatcher = options.dispatcher;
    this.#timeoutMs = options.timeoutMs;
    this.#retry = options.retry ?? defaultRetryPolicy;
    this.#onAttempt = options.onAttempt;
    this.#tracing = options.tracing;
    this.#spanNames = Object.fromEntries(Object.entries(options.routes).map(([operation, route]) => [operation, `${route.method} ${route.path}`])) as Record<OperationName, string>;
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
      // Each attempt is a span of its own, and its traceparent names it (a retry replaces the header).
      const span = this.#tracing.tracer.startSpan(this.#spanNames[spec.operation], clientSpan, context.trace ?? ROOT_CONTEXT);
      this.#tracing.inject(span, request.headers);
      const started = performance.now();
      const outcome = await this.#attempt(request, cancellation, spec).catch(classify);
      const failure = outcome instanceof Failure ? outcome : undefined;
      const status = failure ? failure.status : (outcome as { status: number }).status;
      const retried = failure !== undefined && idempotent && failure.retryable && attempt < this.#retry.limit;
      context.guard?.settled(spec.operation, failure?.code);
      this.#onAttempt?.({ operation: spec.operation, status, code: failure?.code, durationMs: performance.now() - started, retry: attempt > 0 });
      if (span.isRecording()) describeAttempt(span, spec.operation, route, attempt, status, failure?.code, retried);
      span.end();
      if (!failure) return (outcome as { value: T }).value;
      if (!retried) throw fail(failure);
      const backoff = jitter(Math.min(this.#retry.baseDelayMs * 2 ** attempt, this.#retry.maxDelayMs));
      // The retry lives inside the call's timeout: sleeping past it would only delay the failure.
      if (!(await cancellation.pause(backoff))) throw fail(classify(cancellation.reason));
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
    const { schema } = spec;
    const { status, body } = await exchange(this.#dispatcher, request, cancellation);
    if (status >= 200 && status < 300) {
      if (schema === undefined) return { value: undefined as T, status };
      let json: unknown;
      try {
        json = parseJson(body);
      } catch (error) {
        return new Failure('UPSTREAM_ERROR', status, false, { reason: 'the body is not JSON', cause: error });
      }
      const parsed = checkBody(schema, json);
      if (!parsed.success) return new Failure('UPSTREAM_ERROR', status, false, { reason: 'the body is off-contract', cause: parsed.error });
      if (spec.notFoundWhen?.(parsed.data)) return new Failure('NOT_FOUND', status, false);
      return { value: parsed.data, status };
    }
    const code = codeForStatus(status);
    if (code === 'BAD_USER_INPUT') {
      // The detail items tell the client which input was wrong (contract 7); an unreadable
      // body still leaves a 422, only without details.
      let detail: unknown;
      try {
        detail = parseJson(body);
      } catch {
        detail = undefined;
      }
      const details = validationErrorSchema.safeParse(detail);
      return new Failure(code, status, false, { details: details.success ? details.data.detail : [] });
    }
    return new Failure(code, status, this.#retry.statusCodes.includes(status));
  }
}

/**
 * One exchange through undici's `dispatch()`: the answer's status and its body's bytes, whole
 * (undici enforces the pool's maxResponseSize as they arrive). undici's request API would wrap
 * every answer in a Readable stream to read it back with `body.json()`: measured in place on
 * `head(id)`, that cost 35 µs an operation, an eighth of the gateway's CPU. A cancellation before
 * the request is written aborts it once undici starts it, as the request API does with a signal;
 * after, at once.
 */
function exchange(dispatcher: Dispatcher, request: Dispatcher.DispatchOptions, cancellation: CallCancellation): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let status = 0;
    let controller: Dispatcher.DispatchController | undefined;
    const abort = () => controller?.abort(cancellation.reason as Error);
    dispatcher.dispatch(request, {
      onRequestStart(started) {
        controller = started;
        if (cancellation.aborted) started.abort(cancellation.reason as Error);
        else cancellation.once('abort', abort);
      },
      onResponseStart(_, statusCode) {
        status = statusCode;
      },
      onResponseData(_, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        cancellation.off('abort', abort);
        resolve({ status, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) });
      },
      onResponseError(_, error) {
        cancellation.off('abort', abort);
        reject(error);
      },
    });
  });
}

/** A body's JSON, read as UTF-8 with a leading byte order mark dropped (as `body.json()` reads it). */
function parseJson(body: Buffer): unknown {
  const bom = body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
  return JSON.parse(body.toString('utf8', bom ? 3 : 0));
}

const clientSpan = Object.freeze({ kind: SpanKind.CLIENT });

/** An attempt's span attributes: the route, never its filled path, query, body or token. */
function describeAttempt(span: Span, operation: OperationName, route: Route, attempt: number, status: number | undefined, code: UpstreamErrorCode | undefined, retried: boolean): void {
  span.setAttribute(spanAttributes.upstreamOperation, operation);
  span.setAttribute(semconv.ATTR_HTTP_REQUEST_METHOD, route.method);
  span.setAttribute(spanAttributes.urlTemplate, route.path);
  span.setAttribute(spanAttributes.attempt, attempt + 1);
  span.setAttribute(spanAttributes.retried, retried);
  if (attempt > 0) span.setAttribute(semconv.ATTR_HTTP_REQUEST_RESEND_COUNT, attempt);
  if (status !== undefined) span.setAttribute(semconv.ATTR_HTTP_RESPONSE_STATUS_CODE, status);
  if (code !== undefined) {
    span.setAttribute(semconv.ATTR_ERROR_TYPE, code);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
}

function classifyThrown(error: unknown, timeout: { readonly aborted: boolean }, deadlineFirst: boolean, callerSignal: AbortSignal | undefined, retry: RetryPolicy): Failure {
  if (timeout.aborted) return new Failure('UPSTREAM_TIMEOUT', undefined, false, deadlineFirst ? { reason: 'operation deadline', cause: error } : { cause: error });
  if (callerSignal?.aborted) return new Failure('ABORTED', undefined, false, { cause: error });
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    if (timeoutCodes.has(code)) return new Failure('UPSTREAM_TIMEOUT', undefined, false, { cause: error });
    if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') return new Failure('UPSTREAM_ERROR', undefined, false, { reason: 'the body is too large', cause: error });
    if (unavailableCodes.has(code)) return new Failure('UPSTREAM_UNAVAILABLE', undefined, retry.errorCodes.includes(code), { cause: error });
  }
  return new Failure('UPSTREAM_ERROR', undefined, false, { cause: error });
}

/**
 * A change's failure as the client must read it: a timeout or a lost connection that may have
 * come after the request was written is UPSTREAM_OUTCOME_UNKNOWN (the change may have been
 * applied); UPSTREAM_UNAVAILABLE stays only for failures that prove it never left.
 */
function outcomeOfChange(failure: Failure, error: unknown): Failure {
  if (failure.code !== 'UPSTREAM_TIMEOUT' && failure.code !== 'UPSTREAM_UNAVAILABLE') return failure;
  const code = (error as { code?: unknown } | null)?.code;
  if (failure.code === 'UPSTREAM_UNAVAILABLE' && typeof code === 'string' && neverSentCodes.has(code)) return failure;
  const reason = failure.code === 'UPSTREAM_TIMEOUT' ? 'no answer in time' : 'the connection closed';
  return new Failure('UPSTREAM_OUTCOME_UNKNOWN', undefined, false, { reason, cause: failure.extra.cause });
}

function queryString(query: CallSpec<unknown>['query']): string {
  if (query === undefined) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) params.append(name, String(value));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

function jitter(ms: number): number {
  return ms * (0.5 + Math.random());
}
