import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { getOperationAST, type DocumentNode } from 'graphql';
import { requestIdFrom } from '../schema/context.js';
import type { HeaderReader } from '../telemetry/tracing.js';
import { cacheHeaders } from './answers/answer-headers.js';
import { firstHeader } from './http/paths.js';
import { tokenCallerOf } from './callers.js';
import type { GatewayCache } from './response-cache/cache.js';
import { responseCacheKey, tagOf } from './response-cache/plugin.js';
import type { OperationRecorder } from './telemetry/operation-telemetry.js';
import type { LoadShedder } from './traffic/load-shedder.js';

/** Node's request handler (yoga's app is one). */
export type Handler = (request: IncomingMessage, response: ServerResponse) => void;

export interface HitLaneOptions {
  /** The GraphQL endpoint's path. */
  readonly endpoint: string;
  /** The response cache, its store in this process's memory. */
  readonly cache: GatewayCache;
  /** yoga's parse cache: the document of a query text parsed before. */
  readonly parsed: (text: string) => DocumentNode | undefined;
  readonly recorder: OperationRecorder;
  readonly shedder: LoadShedder;
  /** MAX_BODY_BYTES */
  readonly maxBodyBytes: number;
  /** CORS_ORIGINS is set: every answer says `Vary: Origin`. */
  readonly cors: boolean;
  /** Told of every answer the lane sends, for metrics. */
  readonly onAnswered?: () => void;
}

/** The media type an answer is sent in, by the Accept headers the lane takes (as yoga answers them); any other goes to the pipeline. */
const typeByAccept = new Map<string | undefined, string>([
  [undefined, 'application/json; charset=utf-8'],
  ['*/*', 'application/json; charset=utf-8'],
  ['application/json', 'application/json; charset=utf-8'],
  ['application/graphql-response+json', 'application/graphql-response+json; charset=utf-8'],
  ['application/graphql-response+json, application/json', 'application/graphql-response+json; charset=utf-8'],
]);

const jsonBody = /^application\/json\s*(;\s*charset=utf-8\s*)?$/i;

/** Node's headers as the recorder reads them. */
const readerOf = (headers: IncomingHttpHeaders): HeaderReader & Pick<Headers, 'get'> => ({ get: (name) => firstHeader(headers[name]) ?? null, keys: () => Object.keys(headers) });

/** A request the lane may answer, judged on its head: a plain JSON POST of the endpoint, small, from no browser origin. */
function laneMayTake(request: IncomingMessage, options: HitLaneOptions): boolean {
  const { headers } = request;
  if (request.method !== 'POST' || request.url !== options.endpoint || headers.origin !== undefined || headers['content-encoding'] !== undefined) return false;
  const length = Number(headers['content-length']);
  return length > 0 && length <= options.maxBodyBytes && jsonBody.test(headers['content-type'] ?? '') && typeByAccept.has(headers.accept);
}

interface Params {
  readonly query: string;
  readonly operationName: string | null | undefined;
  readonly variables: Record<string, unknown> | null | undefined;
}

/** The body's GraphQL parameters when they are the three of a plain query (no extensions, no batch); else undefined. */
function paramsOf(body: Buffer): Params | undefined {
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
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables))) return undefined;
  return { query, operationName, variables: variables as Record<string, unknown> | null | undefined };
}

/**
 * The lane of cached answers: a query whose answer the response cache keeps is answered here,
 * before yoga, with the policies the pipeline applies (one place each): the shedder's in-flight
 * count (the HTTP server refused overload before this), the response cache's key and lookup, the
 * cache headers' rule (answers/answer-headers.ts) and the operation telemetry's recorder. It takes
 * only what needs nothing else of the pipeline: a JSON POST of the endpoint with a Content-Length
 * within MAX_BODY_BYTES, no Content-Encoding, no Origin (CORS), an Accept the table above knows,
 * a body of `query` (parsed before), `operationName` and `variables` alone, the answer in this
 * process's memory. Everything else, and every miss, goes to the pipeline with the body it read
 * (`request.body`, which @whatwg-node/server takes as the body). The gateway makes the lane only
 * where no caller limit is set (their admission is the pipeline's), trusted documents are not the
 * only ones (a query text is refused there), and the store is this process's memory (a lookup in
 * Redis would be made twice on a miss).
 */
export function withHitLane(app: Handler, options: HitLaneOptions): Handler {
  const { cache, recorder, shedder } = options;
  const answer = (request: IncomingMessage, response: ServerResponse, body: Buffer): boolean => {
    const params = paramsOf(body);
    const document = params === undefined ? undefined : options.parsed(params.query);
    if (params === undefined || document === undefined) return false;
    const operation = getOperationAST(document, params.operationName);
    if (operation?.operation !== 'query') return false;
    const headers = readerOf(request.headers);
    const tokenCaller = tokenCallerOf(firstHeader(request.headers.authorization));
    const kept = cache.peek(responseCacheKey(params.query, params.operationName, params.variables, tokenCaller ?? null));
    if (kept === undefined || kept instanceof Promise || kept.result.data == null) return false;
    shedder.inFlight++;
    const { parent, client } = recorder.arrive(headers);
    const record = recorder.begin(parent, operation.name?.value ?? params.operationName ?? undefined);
    record.type = 'query';
    const requestId = requestIdFrom({ headers });
    const cacheable = { maxAge: Math.max(0, Math.floor((kept.expiresAt - Date.now()) / 1000)), tag: tagOf(kept.result.data) };
    const written = cacheHeaders({ cacheControl: null, vary: null }, { cacheable, credentials: request.headers.authorization !== undefined, cors: options.cors, json: true });
    const json = kept.json ?? JSON.stringify({ data: kept.result.data });
    response.writeHead(200, {
      'content-type': typeByAccept.get(request.headers.accept)!,
      'content-length': Buffer.byteLength(json),
      etag: written.etag!,
      'cache-control': written.cacheControl!,
      vary: written.vary!,
      'x-request-id': requestId,
    });
    response.end(json);
    shedder.inFlight--;
    options.onAnswered?.();
    recorder.finish({ requestId, client }, record, 0, kept.result);
    return true;
  };
  return (request, response) => {
    if (!laneMayTake(request, options)) return app(request, response);
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.once('error', () => response.destroy());
    request.once('end', () => {
      const body = Buffer.concat(chunks);
      if (answer(request, response, body)) return;
      (request as IncomingMessage & { body?: Buffer }).body = body;
      app(request, response);
    });
  };
}
