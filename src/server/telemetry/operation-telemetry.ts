import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type SpanOptions } from '@opentelemetry/api';
import { getOperationAST } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { ClientAwareness, ClientIdentity } from './client-awareness.js';
import type { GatewayContext } from '../../schema/context.js';
import type { GatewayMetrics } from './metrics.js';
import { batchOf } from '../../loaders/request-batch.js';
import { spanAttributes, type Tracing } from '../../telemetry/tracing.js';
import { errorCodesOf, limitOf, operationLabel, outcomeOf, type OperationOutcome } from './operation-outcome.js';
import { requestIdOf } from './request-ids.js';
import { pathOf, servedAsGraphQL } from '../http/paths.js';

export type OperationTelemetryOptions = {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /** The operations' spans. */
  readonly tracing: Tracing;
  /** Which client app sent each request (its headers): operations are counted by client, spans carry it. @default none: not read */
  readonly clients?: ClientAwareness;
} & (
  | {
      /**
       * Distinct operation names the metrics keep apart, the first seen (METRICS_OPERATION_NAMES);
       * later new names are counted as `other`. Names come from clients, so without a cap every
       * new name would be a new set of series.
       */
      readonly maxOperationNames: number;
      readonly operationNames?: undefined;
    }
  | {
      /**
       * The operation names the metrics keep apart, when they are known in advance (the trusted
       * documents' names); every other name is `other`, so no client can crowd them out.
       */
      readonly operationNames: ReadonlySet<string>;
      readonly maxOperationNames?: undefined;
    }
);

type OperationType = 'query' | 'mutation' | 'unknown';

/** One GraphQL operation being handled; lives on the operation's context under a private key. */
interface OperationState {
  readonly startedAt: number;
  /** The operationName the client sent, until the parsed document names the operation. */
  name: string | undefined;
  type: OperationType;
  /** True once execution began (our onExecute ran), so the gauge went up. */
  executing: boolean;
  done: boolean;
  /** Its request's client app, when `clients` is given. */
  readonly client: ClientIdentity | undefined;
  /** The operation's span, a child of the caller's span when its request carries a traceparent. */
  readonly span: Span;
  /** The context naming `span` as the parent: the plan's and the upstream calls' spans hang under it. */
  readonly trace: Context;
}

/** One request to the GraphQL endpoint: the caller's trace and the operations it carries (a batch has several). */
interface RequestState {
  readonly startedAt: number;
  /** The caller's trace, from its traceparent; the root context without one. */
  readonly parent: Context;
  readonly client: ClientIdentity | undefined;
  readonly operations: OperationState[];
}

const operationKey = Symbol('operation-telemetry.operation');
const requestKey = Symbol('operation-telemetry.request');
type WithOperation = { [operationKey]?: OperationState; [requestKey]?: RequestState };

/** The parent context of an operation's plan and upstream calls, once the operation has begun. */
export function operationTrace(context: object): Context | undefined {
  return (context as WithOperation)[operationKey]?.trace;
}

const serverSpan: SpanOptions = Object.freeze({ kind: SpanKind.SERVER });

/** The operation's span, told what the log line says but the request id and the duration. */
function describeOperation(span: Span, state: OperationState, operationName: string, outcome: OperationOutcome, errorCodes: string[], upstreamCalls: number, errors: readonly unknown[] | undefined): void {
  // OpenTelemetry's GraphQL span name: the operation type, then its name if it has one.
  if (state.type !== 'unknown') {
    span.updateName(state.name === undefined ? state.type : `${state.type} ${operationName}`);
    span.setAttribute(spanAttributes.operationType, state.type);
  }
  if (state.name !== undefined) span.setAttribute(spanAttributes.operationName, operationName);
  if (state.client?.name !== undefined) span.setAttribute(spanAttributes.clientName, state.client.name);
  if (state.client?.version !== undefined) span.setAttribute(spanAttributes.clientVersion, state.client.version);
  span.setAttribute(spanAttributes.outcome, outcome);
  span.setAttribute(spanAttributes.upstreamCalls, upstreamCalls);
  if (errorCodes.length > 0) span.setAttribute(spanAttributes.errorCodes, errorCodes);
  const limit = outcome === 'refused' ? limitOf(errors) : undefined;
  if (limit !== undefined) span.setAttribute(spanAttributes.refusedBy, limit);
  // A refusal is the client's mistake, not a failure of ours (as a 4xx on a server span).
  if (outcome === 'error') span.setStatus({ code: SpanStatusCode.ERROR });
}

/**
 * Per GraphQL operation: its span, the in-flight gauge, one observation of the operations
 * histogram (and of the client histogram, with `clients`) and one structured log line.
 *
 * Per-operation work is a handful of hooks that each run once per operation (never per field):
 * onRequest reads the caller's traceparent on the GraphQL endpoint, onParams starts the clock and the span,
 * onValidate reads the operation's name and type from the parsed document, onExecute raises the
 * gauge, onExecutionResult records everything, onResultProcess records a request refused before
 * or while its parameters were read (its body, a batch too large, a missing query) with its
 * errors, and onResponse records an operation that never produced a result. A request refused
 * before it named any operation counts as one operation. The log line and the span carry names,
 * counts, error codes and the refusing limit only: never headers, variables, the query text or
 * error messages.
 */
export function useOperationTelemetry(options: OperationTelemetryOptions): Plugin {
  const { metrics, logger, clients } = options;
  /** The path whose requests carry operations; yoga's, read when it starts. */
  let graphqlEndpoint = '/graphql';
  // The operation line holds only values made here (names cut to [A-Za-z0-9_], ids, counts,
  // codes): redaction, half the cost of the line, has nothing to find in it.
  const operationLog = logger.child({}, { redact: [] });
  const { tracing } = options;
  const maxNames = options.maxOperationNames ?? 0;
  const knownNames = new Set<string>();

  const fixedNames = options.operationNames;
  const metricName = (name: string): string => {
    if (fixedNames !== undefined) return fixedNames.has(name) || name === 'anonymous' ? name : 'other';
    if (knownNames.has(name)) return name;
    if (knownNames.size >= maxNames) return 'other';
    knownNames.add(name);
    return name;
  };

  /** An operation of `request` begins (at `startedAt`, for one refused before its parameters were read). */
  const begin = (request: RequestState | undefined, name: string | undefined, startedAt?: number): OperationState => {
    const parent = request?.parent ?? ROOT_CONTEXT;
    const span = tracing.tracer.startSpan('GraphQL Operation', startedAt === undefined ? serverSpan : { ...serverSpan, startTime: startedAt }, parent);
    const state: OperationState = {
      startedAt: startedAt ?? performance.now(),
      name,
      type: 'unknown',
      executing: false,
      done: false,
      client: request?.client,
      span,
      trace: trace.setSpan(parent, span),
    };
    request?.operations.push(state);
    return state;
  };

  const finish = (
    state: OperationState,
    context: Partial<GatewayContext> & { request?: Request },
    result: { errors?: readonly unknown[] | undefined; data?: unknown } | undefined,
  ): void => {
    if (state.done) return;
    state.done = true;
    if (state.executing) metrics.inFlight.dec();
    const durationMs = performance.now() - state.startedAt;
    const outcome = outcomeOf(result);
    const operationName = operationLabel(state.name);
    // A refused operation never built its context: its request id is made for it.
    const requestId = requestIdOf(context, context.request);
    const upstreamCalls = context.guard?.calls ?? 0;
    const errorCodes = errorCodesOf(result?.errors);
    metrics.operations.observe({ operation: metricName(operationName), type: state.type, outcome }, durationMs / 1000);
    const { client } = state;
    if (client !== undefined) metrics.clientOperations.observe({ client_name: client.nameLabel, client_version: client.versionLabel, outcome }, durationMs / 1000);
    const { span } = state;
    if (span.isRecording()) describeOperation(span, state, operationName, outcome, errorCodes, upstreamCalls, result?.errors);
    span.end();
    const { traceId, spanId } = span.spanContext();
    operationLog.info(
      {
        requestId,
        traceId,
        spanId,
        operationName,
        operationType: state.type,
        outcome,
        durationMs: Math.round(durationMs * 1000) / 1000,
        upstreamCalls,
        errorCodes,
      },
      'graphql operation',
    );
  };

  return {
    onYogaInit({ yoga }) {
      graphqlEndpoint = yoga.graphqlEndpoint;
    },

    onRequest({ request, serverContext }) {
      // A request yoga will take as GraphQL: its clock starts and its caller's trace is read
      // here, not in a yoga onRequestParse hook (yoga runs each of those through promise helpers).
      if (servedAsGraphQL(request.url, pathOf(request.url), graphqlEndpoint)) {
        (serverContext as WithOperation)[requestKey] = { startedAt: performance.now(), parent: tracing.extract(request.headers), client: clients?.identify(request.headers), operations: [] };
      }
    },

    // Each operation of a batch has a context of its own (inheriting the request's state).
    onParams({ params, context }) {
      const operation = context as WithOperation;
      operation[operationKey] = begin(operation[requestKey], typeof params.operationName === 'string' ? params.operationName : undefined);
    },

    onValidate({ context, params }) {
      const state = (context as WithOperation)[operationKey];
      if (state === undefined) return;
      const operation = getOperationAST(params.documentAST, state.name);
      if (operation === null || operation === undefined) return;
      if (operation.name !== undefined) state.name = operation.name.value;
      state.type = operation.operation === 'query' || operation.operation === 'mutation' ? operation.operation : 'unknown';
    },

    onExecute({ args }) {
      const state = (args.contextValue as WithOperation)[operationKey];
      if (state === undefined || state.executing) return;
      state.executing = true;
      metrics.inFlight.inc();
    },

    onExecutionResult({ result, context }) {
      const state = (context as WithOperation)[operationKey];
      if (state === undefined) return;
      // An async iterable (a stream) has no single result: it counts from its set-up, as `ok`.
      const single = result !== undefined && Symbol.asyncIterator in result ? {} : result;
      finish(state, context as Partial<GatewayContext>, single);
    },

    // A request refused before execution: before it named an operation (its body, a batch too
    // large) or after (a missing query). Its errors say which code and which limit.
    onResultProcess({ request, result, serverContext }) {
      const context = serverContext as Partial<GatewayContext> & WithOperation;
      const requestState = context[requestKey];
      if (requestState === undefined || Array.isArray(result) || Symbol.asyncIterator in result) return;
      const state = context[operationKey] ?? (requestState.operations.length === 0 ? begin(requestState, undefined, requestState.startedAt) : undefined);
      if (state !== undefined && !state.done) finish(state, { ...context, request }, result);
    },

    onResponse({ request, serverContext }) {
      const context = serverContext as Partial<GatewayContext> & WithOperation;
      const requestState = context[requestKey];
      if (requestState === undefined) return;
      // Operations that never produced a result of their own (an unsupported media type; a
      // batch's operation with a missing query), or a request that never named one. A batch's
      // operations each have a context of their own; they share the batch's request id.
      if (requestState.operations.length === 0) begin(requestState, undefined, requestState.startedAt);
      for (const operation of requestState.operations) if (!operation.done) finish(operation, { ...context, request, requestId: context.requestId ?? batchOf(request)?.requestId }, undefined);
    },
  };
}
