import {
  type Context,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  type SpanOptions,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { GraphQLError } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { OperationLogSettings } from '../../config.js';
import { refusedByBreaker } from '../../schema/errors.js';
import { type HeaderReader, spanAttributes, type Tracing } from '../../telemetry/tracing.js';
import type { ClientAwareness, ClientIdentity } from '../instruments/client-awareness.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import type { OperationState } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import type { OperationRecord, RequestState } from '../request-state.js';
import { errorCodesOf, limitOf, type OperationOutcome, operationLabel, outcomeOf } from './operation-outcome.js';

export interface OperationTelemetryOptions {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /** Which operations get a log line (OPERATION_LOG, OPERATION_LOG_SLOW_MS). @default every one */
  readonly log?: OperationLogSettings;
  /** The operations' spans. */
  readonly tracing: Tracing;
  /**
   * Which client app sent each request (its headers): operations are counted by client, spans carry it. @default none:
   * not read
   */
  readonly clients?: ClientAwareness;
  /**
   * The operation names the metrics always keep apart, known in advance (the trusted documents'
   * names, METRICS_KNOWN_OPERATIONS): no client can crowd them out. @default none
   */
  readonly operationNames?: ReadonlySet<string>;
  /**
   * Other operation names the metrics keep apart, the first seen (METRICS_OPERATION_NAMES); later
   * new names are counted as `other`. Names come from clients, so without a cap every new name
   * would be a new set of series.
   */
  readonly maxOperationNames: number;
}

const serverSpan: SpanOptions = Object.freeze({ kind: SpanKind.SERVER });

/** The operation's span, told what the log line says but the request id and the duration. */
function describeOperation(
  span: Span,
  state: OperationRecord,
  client: RequestState['client'],
  operationName: string,
  outcome: OperationOutcome,
  errorCodes: string[],
  upstreamCalls: number,
  errors: readonly unknown[] | undefined,
): void {
  // OpenTelemetry's GraphQL span name: the operation type, then its name if it has one.
  if (state.type !== 'unknown') {
    span.updateName(state.name === undefined ? state.type : `${state.type} ${operationName}`);
    span.setAttribute(spanAttributes.operationType, state.type);
  }
  if (state.name !== undefined) span.setAttribute(spanAttributes.operationName, operationName);
  if (client?.name !== undefined) span.setAttribute(spanAttributes.clientName, client.name);
  if (client?.version !== undefined) span.setAttribute(spanAttributes.clientVersion, client.version);
  span.setAttribute(spanAttributes.outcome, outcome);
  span.setAttribute(spanAttributes.upstreamCalls, upstreamCalls);
  if (errorCodes.length > 0) span.setAttribute(spanAttributes.errorCodes, errorCodes);
  const limit = outcome === 'refused' ? limitOf(errors) : undefined;
  if (limit !== undefined) span.setAttribute(spanAttributes.refusedBy, limit);
  // A refusal is the client's mistake, not a failure of ours (as a 4xx on a server span).
  if (outcome === 'error') span.setStatus({ code: SpanStatusCode.ERROR });
}

/** What the telemetry knows of a request when it records one of its operations. */
export interface RecordedRequest {
  readonly requestId: string;
  readonly client: ClientIdentity | undefined;
}

/**
 * Per GraphQL operation: its span, one observation of the operations histogram (and of the client
 * histogram, with `clients`) and, as OPERATION_LOG says, one structured log line (the in-flight
 * gauge is the shedder's count, traffic/in-flight.ts). One recorder per gateway, which the
 * telemetry's steps (useOperationTelemetry) record through.
 * The log line and the span carry names, counts, error codes and the refusing limit only: never
 * headers, variables, the query text or error messages.
 */
export class OperationRecorder {
  readonly #options: OperationTelemetryOptions;
  // The operation line holds only values made here (names cut to [A-Za-z0-9_], ids, counts,
  // codes): redaction, half the cost of the line, has nothing to find in it.
  readonly #log: Logger;
  readonly #logged: (outcome: OperationOutcome, durationMs: number, errors: readonly unknown[] | undefined) => boolean;
  readonly #knownNames = new Set<string>();

  constructor(options: OperationTelemetryOptions) {
    this.#options = options;
    this.#log = options.logger.child({}, { redact: [] });
    const { which, slowMs } = options.log ?? { which: 'all', slowMs: 0 };
    // Production gateways log failures and slow operations, not every success (docs/operations.md#logs),
    // nor the operations open breakers refused whole: an outage's echo, one a request, which the
    // breaker's own line (one per change of state) and the refusals' counter say.
    const refusedWhole = (errors: readonly unknown[] | undefined) =>
      errors?.every((error) => refusedByBreaker(error as { extensions?: Record<string, unknown> }));
    this.#logged =
      which === 'all'
        ? () => true
        : which === 'off'
          ? () => false
          : (outcome, durationMs, errors) => (outcome !== 'ok' && !refusedWhole(errors)) || durationMs >= slowMs;
  }

  /** The caller's trace (its traceparent) and client app, read as its request arrives. */
  arrive(headers: HeaderReader): { readonly parent: Context; readonly client: ClientIdentity | undefined } {
    return { parent: this.#options.tracing.extract(headers), client: this.#options.clients?.identify(headers) };
  }

  /**
   * An operation begins (at `startedAt`, for one refused before its parameters were read), its span linked to `cause`
   * (what caused a subscription's event).
   */
  begin(parent: Context, name: string | undefined, startedAt?: number, cause?: SpanContext): OperationRecord {
    const options =
      startedAt === undefined && cause === undefined
        ? serverSpan
        : { ...serverSpan, startTime: startedAt, links: cause === undefined ? [] : [{ context: cause }] };
    const span = this.#options.tracing.tracer.startSpan('GraphQL Operation', options, parent);
    return {
      startedAt: startedAt ?? performance.now(),
      name,
      type: 'unknown',
      done: false,
      span,
      trace: trace.setSpan(parent, span),
    };
  }

  finish(
    request: RecordedRequest,
    record: OperationRecord,
    upstreamCalls: number,
    result: { errors?: readonly unknown[] | undefined; data?: unknown } | undefined,
  ): void {
    if (record.done) return;
    record.done = true;
    const { metrics } = this.#options;
    const durationMs = performance.now() - record.startedAt;
    const outcome = outcomeOf(result);
    const operationName = operationLabel(record.name);
    const errorCodes = errorCodesOf(result?.errors);
    metrics.operations.observe(
      { operation: this.#metricName(operationName), type: record.type, outcome },
      durationMs / 1000,
    );
    const { client } = request;
    if (client !== undefined)
      metrics.clientOperations.observe(
        { client_name: client.nameLabel, client_version: client.versionLabel, outcome },
        durationMs / 1000,
      );
    const { span } = record;
    if (span.isRecording())
      describeOperation(span, record, client, operationName, outcome, errorCodes, upstreamCalls, result?.errors);
    span.end();
    if (!this.#logged(outcome, durationMs, result?.errors)) return;
    const { traceId, spanId } = span.spanContext();
    this.#log.info(
      {
        requestId: request.requestId,
        traceId,
        spanId,
        operationName,
        operationType: record.type,
        outcome,
        durationMs: Math.round(durationMs * 1000) / 1000,
        upstreamCalls,
        errorCodes,
      },
      'graphql operation',
    );
  }

  /**
   * The metric label of a name: the names known in advance, or the first METRICS_OPERATION_NAMES others seen; any other
   * is `other`.
   */
  #metricName(name: string): string {
    if (name === 'anonymous' || this.#options.operationNames?.has(name) === true || this.#knownNames.has(name))
      return name;
    if (this.#knownNames.size >= this.#options.maxOperationNames) return 'other';
    this.#knownNames.add(name);
    return name;
  }
}

/**
 * The operation telemetry (OperationRecorder records), a policy that concerns events too:
 * - intake: an HTTP request's traceparent and client app are read as it arrives (a request shed
 *   before this has no record);
 * - document: each operation's clock and span start, with the operationName the client sent (a
 *   request that entered at the document stage, a WebSocket message, has its trace and client read
 *   here); a subscription's event hangs under its subscription's span (its request's parent) and
 *   links the write or poll that caused it;
 * - answer: every HTTP answer to a GraphQL request carries its `x-request-id`: the id its log
 *   lines and upstream calls carry (a batch's operations share it);
 * - record: once the results are out, each operation is recorded with its name and type as its
 *   document says, its upstream calls and its outcome (a stream's parts count from its set-up, as
 *   `ok`); a request refused before it named any operation (its body, a batch too large, an
 *   encoding) counts as one, with its refusal's errors.
 */
export function useOperationTelemetry(recorder: OperationRecorder): Policy {
  const begin = (
    request: RequestState,
    name: string | undefined,
    startedAt?: number,
    cause?: SpanContext,
  ): OperationRecord => recorder.begin(request.parent ?? ROOT_CONTEXT, name, startedAt, cause);
  const arrived = (request: RequestState) => {
    const { parent, client } = recorder.arrive(request.headers);
    request.parent = parent;
    request.client = client;
  };
  const finish = (
    request: RequestState,
    operation: OperationState | undefined,
    record: OperationRecord,
    result: { errors?: readonly unknown[] | undefined; data?: unknown } | undefined,
  ) => {
    const definition = operation?.definition;
    if (definition !== undefined) {
      if (definition.name !== undefined) record.name = definition.name.value;
      record.type = operation!.type;
    }
    recorder.finish(request, record, operation?.context?.guard.calls ?? 0, result);
  };
  return {
    name: 'telemetry',
    concerns: 'also events',
    intake: (request) => void arrived(request),
    document(operation) {
      const { request } = operation;
      if (request.parent === undefined) arrived(request);
      const { operationName } = operation.params;
      operation.record = begin(
        request,
        typeof operationName === 'string' ? operationName : undefined,
        undefined,
        operation.event?.change.cause,
      );
      return undefined;
    },
    answer(request, answer) {
      answer.headers.set('x-request-id', request.requestId);
    },
    record(request) {
      // Followed since it arrived: a request shed before that has no record.
      if (request.parent === undefined) return;
      const { refusal } = request;
      if (refusal !== undefined || request.operations.length === 0) {
        finish(
          request,
          undefined,
          begin(request, undefined, request.startedAt),
          refusal instanceof GraphQLError ? { errors: [refusal] } : undefined,
        );
        return;
      }
      for (const operation of request.operations) {
        const record = operation.record ?? begin(request, undefined, request.startedAt);
        const { result } = operation;
        finish(
          request,
          operation,
          record,
          result === undefined || isAsyncIterable(result) ? (result === undefined ? undefined : {}) : result,
        );
      }
    },
  };
}
