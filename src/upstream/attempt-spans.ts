import { type Context, ROOT_CONTEXT, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { OperationName } from '../domain/operations.js';
import { semconv, spanAttributes, type Tracing } from '../telemetry/tracing.js';
import type { UpstreamErrorCode } from './errors.js';
import type { Route, RouteTable } from './routes.js';

const clientSpan = Object.freeze({ kind: SpanKind.CLIENT });

/**
 * The spans of upstream attempts: one per attempt, a retry's too, each named by its route's
 * method and template (never a filled path), and the `traceparent` the attempt sends names it.
 */
export class AttemptSpans {
  readonly #tracing: Tracing;
  /** Per operation, its attempts' span name. */
  readonly #names: Readonly<Record<OperationName, string>>;

  constructor(tracing: Tracing, routes: RouteTable) {
    this.#tracing = tracing;
    this.#names = Object.fromEntries(
      Object.entries(routes).map(([operation, route]) => [operation, `${route.method} ${route.path}`]),
    ) as Record<OperationName, string>;
  }

  /**
   * An attempt's span under `parent` (a trace of its own without one), its traceparent written into `headers` (a
   * retry's replaces the last).
   */
  start(operation: OperationName, parent: Context | undefined, headers: Record<string, string>): Span {
    const span = this.#tracing.tracer.startSpan(this.#names[operation], clientSpan, parent ?? ROOT_CONTEXT);
    this.#tracing.inject(span, headers);
    return span;
  }

  /** Ends an attempt's span, told how the attempt went when spans are recorded. */
  end(
    span: Span,
    operation: OperationName,
    route: Route,
    attempt: number,
    status: number | undefined,
    code: UpstreamErrorCode | undefined,
    retried: boolean,
  ): void {
    if (span.isRecording()) describeAttempt(span, operation, route, attempt, status, code, retried);
    span.end();
  }
}

/** An attempt's span attributes: the route, never its filled path, query, body or token. */
function describeAttempt(
  span: Span,
  operation: OperationName,
  route: Route,
  attempt: number,
  status: number | undefined,
  code: UpstreamErrorCode | undefined,
  retried: boolean,
): void {
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
