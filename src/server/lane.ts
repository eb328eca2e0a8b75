import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from '@opentelemetry/api';
import { getOperationAST, type DocumentNode, type ExecutionResult, type GraphQLError, type OperationDefinitionNode } from 'graphql';
import type { PromiseOrValue } from 'graphql-yoga';
import { requestIdFrom, type ContextRequest, type GatewayContext } from '../schema/context.js';
import type { HeaderReader } from '../telemetry/tracing.js';
import { cacheHeaders } from './answers/answer-headers.js';
import { boundedStringify } from './answers/size-limit.js';
import { firstHeader } from './http/paths.js';
import { nestedDeeperThan } from './intake/params.js';
import type { GatewayCache } from './response-cache/cache.js';
import { responseCacheKey, tagOf } from './response-cache/plugin.js';
import type { OperationRecorder } from './telemetry/operation-telemetry.js';
import type { LoadShedder } from './traffic/load-shedder.js';

/** Node's request handler (yoga's app is one). */
export type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** The GraphQL parameters of a request the lane takes. */
export interface LaneParams {
  readonly query: string;
  readonly operationName: string | null | undefined;
  readonly variables: Record<string, unknown> | null | undefined;
}

/** What a hot query's run is given of its request. */
export interface LaneRequest extends ContextRequest {
  readonly requestId: string;
  /** The operation's span context. */
  readonly trace: Context;
}

/** A hot query's run: its operation's context (whose guard counts its upstream calls) and its result. */
export interface HotRun {
  readonly context: GatewayContext;
  readonly result: PromiseOrValue<ExecutionResult>;
}

/** Hot queries, run by their compiled code before yoga: what the pipeline's parts give the lane. */
export interface HotQueries {
  /**
   * The run of a query, on its request: its compiled code on a context of its own, after its plan
   * (a plan over a limit is its refusal, as the pipeline answers it). Undefined when the pipeline
   * must take it: not executed there yet, not compiled, or variables that do not coerce.
   */
  prepare(document: DocumentNode, params: LaneParams): ((request: LaneRequest) => HotRun) | undefined;
  /** yoga's error masking of a result's errors (and its log line for each one it masks). */
  mask(error: GraphQLError): GraphQLError;
  /** The answer to a result with errors, as yoga's JSON result processor makes it (its status from the errors). */
  respond(result: ExecutionResult, mediaType: string): Response;
  /** MAX_RESPONSE_BYTES, and who is told of each answer it replaces. */
  readonly maxResponseBytes: number;
  readonly onRefused?: () => void;
  /** Told of each answer not written because its client hung up. */
  readonly onAbandoned?: () => void;
  /** Told of each answer the lane sends, for metrics. */
  readonly onAnswered?: () => void;
}

/** Kept answers, from the response cache in this process's memory. */
export interface KeptAnswers {
  readonly cache: GatewayCache;
  /** Told of each answer the lane sends, for metrics. */
  readonly onAnswered?: () => void;
}

export interface LaneOptions {
  /** The GraphQL endpoint's path. */
  readonly endpoint: string;
  /** yoga's parse cache: the document of a query text parsed before. */
  readonly parsed: (text: string) => DocumentNode | undefined;
  readonly recorder: OperationRecorder;
  readonly shedder: LoadShedder;
  /** MAX_BODY_BYTES */
  readonly maxBodyBytes: number;
  /** MAX_VARIABLES_DEPTH: deeper variables go to the pipeline, which refuses them. */
  readonly maxVariablesDepth: number;
  /** CORS_ORIGINS is set: every answer says `Vary: Origin`. */
  readonly cors: boolean;
  /** Answers the response cache keeps: with it on, in memory. */
  readonly kept?: KeptAnswers;
  /** Hot queries: with compiled execution on and no response cache (whose misses and stores are the pipeline's). */
  readonly hot?: HotQueries;
}

/** The media type an answer is sent in, by the Accept headers the lane takes (as yoga answers them); any other goes to the pipeline. */
const typeByAccept = new Map<string | undefined, string>([
  [undefined, 'application/json'],
  ['*/*', 'application/json'],
  ['application/json', 'application/json'],
  ['application/graphql-response+json', 'application/graphql-response+json'],
  ['application/graphql-response+json, application/json', 'application/graphql-response+json'],
]);

const jsonBody = /^application\/json\s*(;\s*charset=utf-8\s*)?$/i;

/** Node's headers as the recorder and the context read them. */
const readerOf = (headers: IncomingHttpHeaders): HeaderReader & Pick<Headers, 'get'> => ({ get: (name) => firstHeader(headers[name]) ?? null, keys: () => Object.keys(headers) });

/** A request the lane may answer, judged on its head: a plain JSON POST of the endpoint, small, from no browser origin. */
function laneMayTake(request: IncomingMessage, options: LaneOptions): boolean {
  const { headers } = request;
  if (request.method !== 'POST' || request.url !== options.endpoint || headers.origin !== undefined || headers['content-encoding'] !== undefined) return false;
  const length = Number(headers['content-length']);
  return length > 0 && length <= options.maxBodyBytes && jsonBody.test(headers['content-type'] ?? '') && typeByAccept.has(headers.accept);
}

/** The body's GraphQL parameters when they are the three of a plain query (no extensions, no batch) within the variables' depth; else undefined. */
function paramsOf(body: Buffer, maxVariablesDepth: number): LaneParams | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const { query, operationName, variables, ...rest } = parsed as Record<string, unknown>;
  if (typeof query !== 'string' || Object.keys(rest).length > 0) return undefined;
  if (operationName !== undefined && operationName !== null && typeof operationName !== 'string') return undefined;
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables) || nestedDeeperThan(variables, maxVariablesDepth))) return undefined;
  return { query, operationName, variables: variables as Record<string, unknown> | null | undefined };
}

/** A query the lane takes, as its body and the parse cache give it. */
interface LaneQuery {
  readonly params: LaneParams;
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
}

/** The query of a body, when it is one parsed before; else undefined (the pipeline takes it). */
function queryOf(body: Buffer, options: LaneOptions): LaneQuery | undefined {
  const params = paramsOf(body, options.maxVariablesDepth);
  const document = params === undefined ? undefined : options.parsed(params.query);
  if (params === undefined || document === undefined) return undefined;
  const operation = getOperationAST(document, params.operationName);
  return operation?.operation === 'query' ? { params, document, operation } : undefined;
}

/** An operation the lane answers, from its arrival: counted in flight for its caller (admitted at the door), recorded, its request id. */
function arrive(request: IncomingMessage, query: LaneQuery, options: LaneOptions) {
  const { recorder, shedder } = options;
  const caller = shedder.callerOf(request);
  shedder.hold(caller);
  const headers = readerOf(request.headers);
  const { parent, client } = recorder.arrive(headers);
  const record = recorder.begin(parent, query.operation.name?.value ?? query.params.operationName ?? undefined);
  record.type = 'query';
  return { caller, headers, record, requested: { requestId: requestIdFrom({ headers }), client } };
}

type Arrival = ReturnType<typeof arrive>;

/** Writes the answer to an operation the lane took. */
function send(response: ServerResponse, request: IncomingMessage, arrival: Arrival, options: LaneOptions, answer: { status: number; type: string; body: string; headers?: Record<string, string>; cacheable?: { maxAge: number; tag: string } }): void {
  const written = cacheHeaders({ cacheControl: null, vary: null }, { cacheable: answer.cacheable, credentials: request.headers.authorization !== undefined, cors: options.cors, json: answer.status === 200 });
  response.writeHead(answer.status, {
    ...answer.headers,
    'content-type': `${answer.type}; charset=utf-8`,
    'content-length': Buffer.byteLength(answer.body),
    ...(written.etag === undefined ? {} : { etag: written.etag }),
    ...(written.cacheControl === null ? {} : { 'cache-control': written.cacheControl }),
    ...(written.vary === null ? {} : { vary: written.vary }),
    'x-request-id': arrival.requested.requestId,
  });
  response.end(answer.body);
}

/** Answers a query whose answer the response cache keeps; false when it keeps none. */
function answerKept(kept: KeptAnswers, request: IncomingMessage, response: ServerResponse, query: LaneQuery, options: LaneOptions): boolean {
  const { params } = query;
  // Worked out once for the request (its credential hashed once): `arrive`, or the pipeline on a miss, read it again.
  const { token } = options.shedder.callerOf(request);
  const answer = kept.cache.peek(responseCacheKey(params.query, params.operationName, params.variables, token ?? null));
  if (answer === undefined || answer instanceof Promise || answer.result.data == null) return false;
  const arrival = arrive(request, query, options);
  const cacheable = { maxAge: Math.max(0, Math.floor((answer.expiresAt - Date.now()) / 1000)), tag: tagOf(answer.result.data) };
  try {
    send(response, request, arrival, options, { status: 200, type: typeByAccept.get(request.headers.accept)!, body: answer.json ?? JSON.stringify({ data: answer.result.data }), cacheable });
  } finally {
    options.shedder.release(arrival.caller);
  }
  kept.onAnswered?.();
  options.recorder.finish(arrival.requested, arrival.record, 0, answer.result);
  return true;
}

/** Runs a hot query by its compiled code and answers it; false when the pipeline must take it. */
function answerHot(hot: HotQueries, request: IncomingMessage, response: ServerResponse, query: LaneQuery, options: LaneOptions): boolean {
  const run = hot.prepare(query.document, query.params);
  if (run === undefined) return false;
  const arrival = arrive(request, query, options);
  // A client that hangs up cancels its upstream calls (as yoga's request signal does), and its answer is never serialised.
  const hangUp = new AbortController();
  response.once('close', () => {
    if (!response.writableEnded) hangUp.abort();
  });
  let started: HotRun | undefined;
  let result: PromiseOrValue<ExecutionResult>;
  try {
    started = run({ headers: arrival.headers, signal: hangUp.signal, requestId: arrival.requested.requestId, trace: arrival.record.trace });
    result = started.result;
  } catch (error) {
    // Answered as the pipeline answers an executor that throws: masked, and its status from it.
    result = { errors: [error as GraphQLError] };
  }
  const type = typeByAccept.get(request.headers.accept)!;
  const answer = async (done: ExecutionResult & { stringify?: (value: unknown) => string }) => {
    const masked = done.errors?.length ? { ...done, errors: done.errors.map((error) => hot.mask(error)) } : done;
    options.recorder.finish(arrival.requested, arrival.record, started?.context.guard.calls ?? 0, masked);
    if (hangUp.signal.aborted) {
      hot.onAbandoned?.();
      return;
    }
    const stringify = boundedStringify(done.stringify ?? JSON.stringify, hot.maxResponseBytes, hot.onRefused);
    if (!masked.errors?.length) send(response, request, arrival, options, { status: 200, type, body: stringify(masked) });
    else {
      // The status and headers of a result with errors are yoga's rules (its JSON result processor).
      const processed = hot.respond(Object.assign(masked, { stringify }), type);
      // Their names lower-cased, as `send` writes its own: yoga's `Content-Type` beside its `content-type` would go out twice.
      const headers = Object.fromEntries(Array.from(processed.headers, ([name, value]) => [name.toLowerCase(), value]));
      send(response, request, arrival, options, { status: processed.status, type, body: await processed.text(), headers });
    }
    hot.onAnswered?.();
  };
  Promise.resolve(result)
    .catch((error: unknown) => ({ errors: [error as GraphQLError] }))
    .then(answer)
    .catch(() => response.destroy())
    .finally(() => options.shedder.release(arrival.caller));
  return true;
}

/**
 * The lane before yoga: a plain query answered without the pipeline's per-request machinery, with
 * the policies the pipeline applies (one place each): the HTTP server's early refusals (overload,
 * by the shedder's rule), the shedder's in-flight count and who holds it, the operation
 * telemetry's recorder and the cache headers' rule (answers/answer-headers.ts). It answers two
 * kinds of query:
 * - **kept**: one whose answer the response cache keeps (its key and lookup), with the response
 *   cache in this process's memory (a lookup in Redis would be made twice on a miss);
 * - **hot**: one the pipeline has executed and compiled (documents/compiled-execution.ts), so
 *   parsed, validated and within every limit there, run by its compiled code on a context of its
 *   own after the same plan and budget (documents/upstream-plan.ts), its errors masked and its
 *   status decided as yoga does, its answer bounded by the response size limit
 *   (answers/size-limit.ts), cancelled when its client hangs up. Only without a response cache,
 *   whose misses and stores are the pipeline's.
 * It takes only what needs nothing else of the pipeline: a JSON POST of the endpoint with a
 * Content-Length within MAX_BODY_BYTES, no Content-Encoding, no Origin (CORS), an Accept the table
 * above knows, a body of `query` (parsed before), `operationName` and `variables` alone, a query.
 * Everything else goes to the pipeline with the body it read (`request.body`, which
 * @whatwg-node/server takes as the body). The gateway makes the lane only where no caller limit is
 * set (their admission and charge are the pipeline's) and trusted documents are not the only ones
 * (a query text is refused there).
 */
export function withLane(app: Handler, options: LaneOptions): Handler {
  const { kept, hot } = options;
  const answer = (request: IncomingMessage, response: ServerResponse, body: Buffer): boolean => {
    const query = queryOf(body, options);
    if (query === undefined) return false;
    return (kept !== undefined && answerKept(kept, request, response, query, options)) || (hot !== undefined && answerHot(hot, request, response, query, options));
  };
  return (request, response) => {
    if (!laneMayTake(request, options)) return app(request, response);
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.once('error', () => response.destroy());
    request.once('end', () => {
      const body = Buffer.concat(chunks);
      try {
        if (answer(request, response, body)) return;
      } catch {
        // Nothing was begun before what threw (what begins an answer cannot throw): the pipeline decides.
      }
      (request as IncomingMessage & { body?: Buffer }).body = body;
      app(request, response);
    });
  };
}
