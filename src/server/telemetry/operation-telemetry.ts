import {
  type Context,
  ROOT_CONTEXT,
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
import {
  errorCodesOf,
  faultOf,
  limitOf,
  type OperationOutcome,
  operationFaults,
  operationLabel,
  outcomeOf,
} from './operation-outcome.js';

export interface OperationTelemetryOptions {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /** Which operations get a log line (OPERATION_LOG, OPERATION_LOG_SLOW_MS). @default every one */
  readonly log?: OperationLogSettings;
  readonly tracing: Tracing;
  /** Which client app sent each request: operations are counted by client, spans carry it. @default none: not read */
  readonly clients?: ClientAwareness;
  /** Names the metrics always keep apart (METRICS_KNOWN_OPERATIONS): no client can crowd them out. @default none */
  readonly operationNames?: ReadonlySet<string>;
  /** METRICS_OPERATION_NAMES: other names kept apart, the first seen, then `other` (each would be a new series). */
  readonly maxOperationNames: number;
}

type Result = Parameters<typeof outcomeOf>[0];
type RecordedRequest = Pick<RequestState, 'requestId' | 'client'>;

const serverSpan: SpanOptions = Object.freeze({ kind: SpanKind.SERVER });

/** The operation's span, told what the log line says but the request id and the duration. */
function describeOperation(
  state: OperationRecord,
  client: RequestState['client'],
  operationName: string,
  outcome: OperationOutcome,
  errorCodes: string[],
  upstreamCalls: number,
  errors: readonly unknown[] | undefined,
): void {
  const { span } = state;
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

/** Its line and span carry names, counts, codes and limits only: never headers, variables, query text or messages. */
export class OperationRecorder {
  readonly #options: OperationTelemetryOptions;
  // Only values made here (names cut to [A-Za-z0-9_], ids, counts, codes): redaction, half the line's cost, finds none.
  readonly #log: Logger;
  readonly #logged: (outcome: OperationOutcome, durationMs: number, errors: readonly unknown[] | undefined) => boolean;
  readonly #knownNames = new Set<string>();

  constructor(options: OperationTelemetryOptions) {
    this.#options = options;
    this.#log = options.logger.child({}, { redact: [] });
    // The availability SLO's bad events exist from the start (at 0), so a ratio over them has a beginning.
    for (const type of ['query', 'mutation'])
      for (const fault of operationFaults) options.metrics.operationFaults.inc({ type, fault }, 0);
    const { which, slowMs } = options.log ?? { which: 'all', slowMs: 0 };
    // Failures and slow ones (docs/operations.md#logs), not breakers' whole refusals: an outage's echo it logs.
    const refusedWhole = (errors: readonly unknown[] | undefined) =>
      errors?.every((error) => refusedByBreaker(error as { extensions?: Record<string, unknown> }));
    this.#logged = (outcome, durationMs, errors) =>
      which === 'all' || (which !== 'off' && ((outcome !== 'ok' && !refusedWhole(errors)) || durationMs >= slowMs));
  }

  arrive(headers: HeaderReader): { readonly parent: Context; readonly client: ClientIdentity | undefined } {
    return { parent: this.#options.tracing.extract(headers), client: this.#options.clients?.identify(headers) };
  }

  /** `startedAt`: for one refused before its parameters were read; `cause`: what caused a subscription's event. */
  begin(parent: Context, name: string | undefined, startedAt?: number, cause?: SpanContext): OperationRecord {
    const options =
      startedAt === undefined && cause === undefined
        ? serverSpan
        : { ...serverSpan, startTime: startedAt, links: cause === undefined ? [] : [{ context: cause }] };
    const span = this.#options.tracing.tracer.startSpan('GraphQL Operation', options, parent);
    const context = trace.setSpan(parent, span);
    const at = startedAt ?? performance.now();
    return { startedAt: at, name, type: 'unknown', live: false, done: false, span, trace: context };
  }

  finish(request: RecordedRequest, record: OperationRecord, upstreamCalls: number, result: Result): void {
    if (record.done) return;
    record.done = true;
    const { metrics } = this.#options;
    const durationMs = performance.now() - record.startedAt;
    const errors = result?.errors;
    const outcome = outcomeOf(result);
    const operationName = operationLabel(record.name);
    const errorCodes = errorCodesOf(errors);
    const seconds = durationMs / 1000;
    const type = record.live ? 'live' : record.type;
    metrics.operations.observe({ operation: this.#metricName(operationName), type, outcome }, seconds);
    const fault = faultOf(errors);
    if (fault !== undefined) metrics.operationFaults.inc({ type, fault });
    const { client } = request;
    if (client !== undefined)
      metrics.clientOperations.observe(
        { client_name: client.nameLabel, client_version: client.versionLabel, outcome },
        seconds,
      );
    const { span } = record;
    if (span.isRecording())
      describeOperation(record, client, operationName, outcome, errorCodes, upstreamCalls, errors);
    span.end();
    if (!this.#logged(outcome, durationMs, errors)) return;
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

  #metricName(name: string): string {
    if (name === 'anonymous' || this.#options.operationNames?.has(name) === true || this.#knownNames.has(name))
      return name;
    if (this.#knownNames.size >= this.#options.maxOperationNames) return 'other';
    this.#knownNames.add(name);
    return name;
  }
}

/** A WebSocket message's trace is read at the document stage; a subscription's event hangs under its subscription. */
export function useOperationTelemetry(recorder: OperationRecorder): Policy {
  // A record from the request's arrival, for what was refused before its operation's record began.
  const late = (request: RequestState) => recorder.begin(request.parent ?? ROOT_CONTEXT, undefined, request.startedAt);
  const arrived = (request: RequestState) => void Object.assign(request, recorder.arrive(request.headers));
  const finish = (request: RequestState, record: OperationRecord, result: Result, operation?: OperationState) => {
    const definition = operation?.definition;
    if (definition !== undefined) {
      if (definition.name !== undefined) record.name = definition.name.value;
      record.type = operation!.type;
      record.live = operation!.live;
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
      const name = typeof operationName === 'string' ? operationName : undefined;
      operation.record = recorder.begin(request.parent ?? ROOT_CONTEXT, name, undefined, operation.event?.change.cause);
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
        finish(request, late(request), refusal instanceof GraphQLError ? { errors: [refusal] } : undefined);
        return;
      }
      for (const operation of request.operations) {
        const { result } = operation;
        // A stream counts from its set-up, as `ok`.
        const answered = result === undefined ? undefined : isAsyncIterable(result) ? {} : result;
        finish(request, operation.record ?? late(request), answered, operation);
      }
    },
  };
}
