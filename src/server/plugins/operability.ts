import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type SpanOptions } from '@opentelemetry/api';
import { getOperationAST, type GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Logger } from 'pino';
import type { ClientAwareness, ClientIdentity } from '../client-awareness.js';
import { requestIdFrom, type GatewayContext } from '../../schema/context.js';
import type { GatewayMetrics } from '../metrics.js';
import { healthy, probeAnswer, type ProbeAnswer } from '../probes.js';
import { batchOf } from '../../loaders/request-batch.js';
import { createTracing, spanAttributes, type Tracing } from '../../telemetry/tracing.js';

export type OperabilityOptions = {
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  /** Whether the upstream answered recently (cached by the caller). */
  readonly ready: () => Promise<boolean>;
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

export type OperationOutcome = 'ok' | 'error' | 'refused';
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
  requestId: string | undefined;
  /** Its request's client app, when the operability reads them. */
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

const operationKey = Symbol('operability.operation');
const requestKey = Symbol('operability.request');
type WithOperation = { [operationKey]?: OperationState; [requestKey]?: RequestState };

const HEALTH = '/health';
const MAX_NAME_LENGTH = 64;
const MAX_ERROR_CODES = 10;
const invalidNameChars = /[^A-Za-z0-9_]/g;


/** The path of an absolute request URL without building a URL object (this runs per request). */
function pathOf(url: string): string {
  const scheme = url.indexOf('://');
  const start = scheme < 0 ? url.indexOf('/') : url.indexOf('/', scheme + 3);
  if (start < 0) return '/';
  let end = url.length;
  for (let i = start; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 63 /* ? */ || c === 35 /* # */) {
      end = i;
      break;
    }
  }
  return url.slice(start, end);
}

/**
 * Whether yoga serves a request as GraphQL rather than as an unknown route: its rule
 * (use-unhandled-route), the endpoint's path with or without a trailing slash, or a URL that ends
 * in it.
 */
function servedAsGraphQL(url: string, path: string, endpoint: string): boolean {
  return path === endpoint || path === `${endpoint}/` || url.endsWith(endpoint) || url.endsWith(`${endpoint}/`);
}

/** A name safe as a label and a log field: ASCII letters, digits and `_`, at most 64 of them. */
export function operationLabel(name: string | null | undefined): string {
  if (name === undefined || name === null || name === '') return 'anonymous';
  const capped = name.length > MAX_NAME_LENGTH ? name.slice(0, MAX_NAME_LENGTH) : name;
  return capped.replace(invalidNameChars, '_');
}

/**
 * The outcome rule. GraphQL itself says when a request never reached execution: its result has
 * errors and no `data` entry at all (spec, "Response Format"). So:
 * - `ok`: no errors;
 * - `error`: errors and a `data` entry (even `null`): execution ran and something failed;
 * - `refused`: errors without `data`: turned away before execution (request parameters, syntax,
 *   validation with the depth/alias/token/directive limits and disabled introspection, variables
 *   that do not fit their types, the upstream call budget estimate); it made no upstream call.
 * A masked crash (INTERNAL_SERVER_ERROR) without data is an `error`, not a refusal: a bug must
 * not hide among bad requests.
 */
export function outcomeOf(result: { errors?: readonly unknown[] | undefined; data?: unknown } | undefined): OperationOutcome {
  if (result === undefined) return 'refused';
  const errors = result.errors;
  if (errors === undefined || errors.length === 0) return 'ok';
  if ('data' in result && result.data !== undefined) return 'error';
  for (const error of errors) if (codeOf(error) === 'INTERNAL_SERVER_ERROR') return 'error';
  return 'refused';
}

function codeOf(error: unknown): string | undefined {
  const code = (error as Partial<GraphQLError> | null)?.extensions?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The limit a refusal names in `extensions.limit` (the `limit` label of gateway_refusals_total). */
function limitOf(errors: readonly unknown[] | undefined): string | undefined {
  for (const error of errors ?? []) {
    const limit = (error as Partial<GraphQLError> | null)?.extensions?.limit;
    if (typeof limit === 'string') return limit;
  }
  return undefined;
}

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

/** Distinct error codes of a result, at most MAX_ERROR_CODES, for the log line. */
function errorCodesOf(errors: readonly unknown[] | undefined): string[] {
  const codes: string[] = [];
  if (errors === undefined) return codes;
  for (const error of errors) {
    const code = codeOf(error) ?? 'UNKNOWN';
    if (!codes.includes(code)) {
      codes.push(code);
      if (codes.length === MAX_ERROR_CODES) break;
    }
  }
  return codes;
}

/**
 * /health, /ready, /metrics and, per GraphQL operation, its span, the in-flight gauge, one
 * observation of the operations histogram (and of the client histogram, with `clients`), one
 * structured log line and the `x-request-id` response header.
 *
 * Per-operation work is a handful of hooks that each run once per operation (never per field):
 * onRequest reads the caller's traceparent on the GraphQL endpoint, onParams starts the clock and the span,
 * onValidate reads the operation's name and type from the parsed document, onExecute raises the
 * gauge, onExecutionResult records everything, onResultProcess records a request refused before
 * or while its parameters were read (its body, a batch too large, a missing query) with its
 * errors, and onResponse echoes the request id (and records an operation that never produced a
 * result). A request refused before it named any operation counts as one operation. The log line
 * and the span carry names, counts, error codes and the refusing limit only: never headers,
 * variables, the query text or error messages.
 */
export function useOperability(options: OperabilityOptions): Plugin<GatewayContext> {
  const { metrics, logger, ready, clients } = options;
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
      requestId: undefined,
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
    // A refused operation never built its context: its request id is made here, from the same rule.
    const requestId = context.requestId ?? (state.requestId ??= context.request ? requestIdFrom(context.request) : undefined);
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

  const respond = (fetchAPI: { Response: typeof Response }, answer: ProbeAnswer): Response => new fetchAPI.Response(answer.body, { status: answer.status, headers: answer.headers });
  const probes = { ready, metrics };

  return {
    onYogaInit({ yoga }) {
      graphqlEndpoint = yoga.graphqlEndpoint;
    },

    onRequest({ request, serverContext, fetchAPI, endResponse }) {
      const path = pathOf(request.url);
      if (request.method === 'GET' || request.method === 'HEAD') {
        // /health answers here when yoga's own health check (default endpoint /health, rewritten
        // in onResponse) is moved elsewhere with `healthCheckEndpoint`.
        const answer = probeAnswer(path, probes);
        if (answer instanceof Promise) return answer.then((answered) => endResponse(respond(fetchAPI, answered)));
        if (answer !== undefined) return endResponse(respond(fetchAPI, answer));
      }
      // A request yoga will take as GraphQL: its clock starts and its caller's trace is read
      // here, not in a yoga onRequestParse hook (yoga runs each of those through promise helpers).
      if (servedAsGraphQL(request.url, path, graphqlEndpoint)) {
        (serverContext as WithOperation)[requestKey] = { startedAt: performance.now(), parent: tracing.extract(request.headers), client: clients?.identify(request.headers), operations: [] };
      }
      return;
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

    onResponse({ request, response, serverContext, setResponse, fetchAPI }) {
      const context = serverContext as Partial<GatewayContext> & WithOperation;
      const requestState = context[requestKey];
      // A batch's operations each have a context of their own; they share the batch's request id.
      const batchId = batchOf(request)?.requestId;
      if (requestState !== undefined) {
        // Operations that never produced a result of their own (an unsupported media type; a
        // batch's operation with a missing query), or a request that never named one.
        if (requestState.operations.length === 0) begin(requestState, undefined, requestState.startedAt);
        for (const operation of requestState.operations) if (!operation.done) finish(operation, { ...context, request, requestId: context.requestId ?? batchId }, undefined);
      }
      const requestId = context.requestId ?? batchId ?? requestState?.operations[0]?.requestId;
      if (requestId !== undefined) response.headers.set('x-request-id', requestId);
      // yoga's built-in health check answers /health before any plugin sees it, with no body;
      // give it ours (it is the only response carrying x-yoga-id).
      if (response.headers.has('x-yoga-id') && request.url.endsWith(HEALTH)) setResponse(respond(fetchAPI, healthy()));
    },
  };
}
