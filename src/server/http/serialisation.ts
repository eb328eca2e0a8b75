import { type ExecutionResult, GraphQLError } from 'graphql';

/*
 * The one serialisation of an answer, and the one rule of its status: every answer, whole or in
 * parts, on every transport, is written by these (answers/answer.ts, answers/parts.ts; WebSocket's
 * messages take `publicResult`'s shape, transports/socket-operation.ts).
 */

/**
 * A result's errors as clients read them: GraphQL's shape, without the extensions meant for the server (`http`,
 * `unexpected`).
 */
function errorJson(error: GraphQLError): unknown {
  const json = error.toJSON() as {
    message: string;
    locations?: unknown;
    path?: unknown;
    extensions?: Record<string, unknown>;
  };
  if (json.extensions === undefined || (!('http' in json.extensions) && !('unexpected' in json.extensions)))
    return json;
  const { http: _http, unexpected: _unexpected, ...extensions } = json.extensions;
  return {
    message: json.message,
    locations: json.locations,
    path: json.path,
    extensions: Object.keys(extensions).length > 0 ? extensions : undefined,
  };
}

/**
 * A result's extensions without `http` (what the status and headers were made of), or undefined when nothing is left.
 */
function publicExtensions(extensions: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (extensions === undefined || !('http' in extensions)) return extensions;
  const { http: _http, ...rest } = extensions;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/** Errors as clients read them (each a GraphQLError's JSON without the server's extensions). */
export const errorsJson = (errors: readonly unknown[]): unknown[] =>
  errors.map((error) => (error instanceof GraphQLError ? errorJson(error) : error));

/** A part's entries (`incremental`, `completed`) with their errors as clients read them. */
function entriesJson(entries: unknown): unknown {
  if (!Array.isArray(entries) || !entries.some((entry: { errors?: unknown }) => Array.isArray(entry?.errors)))
    return entries;
  return entries.map((entry: { errors?: unknown }) =>
    Array.isArray(entry?.errors) ? { ...entry, errors: errorsJson(entry.errors) } : entry,
  );
}

/** Whether a result is already as clients read it: nothing to put first, nothing to take out (most answers). */
const asRead = (result: ExecutionResult): boolean =>
  result.errors === undefined &&
  result.extensions === undefined &&
  !('incremental' in result) &&
  !('completed' in result);

/**
 * A result as JSON: `errors` before everything else (as the GraphQL spec suggests: a client
 * reading the answer in order learns first that it is partial), then `data` and whatever else a
 * result holds (a part's `hasNext`, `incremental`, `pending`, `completed`, their errors as the
 * result's), then `extensions`.
 */
export function serialise(result: ExecutionResult): string {
  return JSON.stringify(publicResult(result));
}

/**
 * A result as `serialise` writes it, as an object: for a transport whose library writes the JSON (WebSocket's `next`).
 */
export function publicResult(result: ExecutionResult): Record<string, unknown> {
  if (asRead(result)) return result as Record<string, unknown>;
  const { errors, extensions, ...rest } = result as ExecutionResult & Record<string, unknown>;
  if (rest.incremental !== undefined) rest.incremental = entriesJson(rest.incremental);
  if (rest.completed !== undefined) rest.completed = entriesJson(rest.completed);
  const answer: Record<string, unknown> = errors?.length ? { errors: errorsJson(errors), ...rest } : rest;
  const shown = publicExtensions(extensions as Record<string, unknown> | undefined);
  if (shown !== undefined) answer.extensions = shown;
  return answer;
}

type HttpExtensions = { status?: number; headers?: Record<string, string>; spec?: boolean };

const httpOf = (holder: { extensions?: unknown } | undefined): HttpExtensions | undefined =>
  (holder?.extensions as { http?: HttpExtensions } | undefined)?.http;

/** Whether an error is the gateway's own GraphQL error, not something thrown that was wrapped. */
function isOriginalGraphQLError(error: unknown): boolean {
  let current = error;
  while (current instanceof GraphQLError) {
    if (current.originalError == null) return true;
    current = current.originalError;
  }
  return false;
}

/**
 * The status of a single result, and the headers its `extensions.http` ask for (into `headers`),
 * by GraphQL over HTTP's rules as yoga applies them: the largest status an error asks for; 500
 * for an unexpected error with no data at all; else 200. `json`: the answer is
 * application/json, where an error the spec itself answers 200 for (`http.spec`) keeps 200.
 */
export function statusOf(result: ExecutionResult, headers: Map<string, string>, json: boolean): number {
  let status: number | undefined;
  let unexpected = false;
  const answerHttp = httpOf(result);
  if (answerHttp !== undefined) {
    for (const [name, value] of Object.entries(answerHttp.headers ?? {})) headers.set(name.toLowerCase(), value);
    if (answerHttp.status) status = answerHttp.status;
  }
  if (!result.errors?.length) return status ?? 200;
  for (const error of result.errors) {
    const http = httpOf(error);
    if (http === undefined) {
      if (!isOriginalGraphQLError(error) || (error.extensions as { unexpected?: unknown } | undefined)?.unexpected)
        unexpected = true;
      continue;
    }
    for (const [name, value] of Object.entries(http.headers ?? {})) headers.set(name.toLowerCase(), value);
    if (json && http.spec) continue;
    if (http.status && (status === undefined || http.status > status)) status = http.status;
  }
  return status ?? (unexpected && !('data' in result) ? 500 : 200);
}

/**
 * Whether a JSON answer keeps 200 for a request error the spec answers 200 under application/json:
 * yoga's rule (every error a GraphQL error, one of them not wrapping something thrown).
 */
export function jsonKeepsSpecStatus(result: ExecutionResult): boolean {
  const errors = result.errors;
  return (
    errors !== undefined &&
    errors.length > 0 &&
    errors.some((error) => error instanceof GraphQLError) &&
    errors.some((error) => {
      const original = (error.extensions as { originalError?: unknown } | undefined)?.originalError;
      return original === undefined || original instanceof GraphQLError;
    })
  );
}
