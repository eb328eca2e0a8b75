import { type ExecutionResult, GraphQLError } from 'graphql';

/* The one serialisation of an answer, and the one rule of its status, for every transport. */

/** Extensions without those meant for the server (`http`: the status and headers), undefined if nothing is left. */
function without(keys: readonly string[], extensions: Record<string, unknown> | undefined) {
  if (extensions === undefined || !keys.some((key) => key in extensions)) return extensions;
  const rest = Object.fromEntries(Object.entries(extensions).filter(([key]) => !keys.includes(key)));
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/** An error as clients read it: without `http` and `unexpected` (what its answer's status was made of). */
function errorJson(error: GraphQLError): unknown {
  const json = error.toJSON();
  const extensions = without(['http', 'unexpected'], json.extensions);
  return extensions === json.extensions ? json : { ...json, extensions };
}

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

/** A result as JSON: `errors` first (as the GraphQL spec suggests: partial answers say so first), `extensions` last. */
export function serialise(result: ExecutionResult): string {
  return JSON.stringify(publicResult(result));
}

/** A result as `serialise` writes it, as an object: for a library that writes the JSON (WebSocket's `next`). */
export function publicResult(result: ExecutionResult): Record<string, unknown> {
  if (asRead(result)) return result as Record<string, unknown>;
  const { errors, extensions, ...rest } = result as ExecutionResult & Record<string, unknown>;
  if (rest.incremental !== undefined) rest.incremental = entriesJson(rest.incremental);
  if (rest.completed !== undefined) rest.completed = entriesJson(rest.completed);
  const answer: Record<string, unknown> = errors?.length ? { errors: errorsJson(errors), ...rest } : rest;
  const shown = without(['http'], extensions as Record<string, unknown> | undefined);
  if (shown !== undefined) answer.extensions = shown;
  return answer;
}

type HttpExtensions = { status?: number; headers?: Record<string, string>; spec?: boolean };

const httpOf = (holder: { extensions?: unknown } | undefined): HttpExtensions | undefined =>
  (holder?.extensions as { http?: HttpExtensions } | undefined)?.http;

/** Whether an error is the gateway's own GraphQL error, not something thrown that was wrapped. */
const isOriginalGraphQLError = (error: unknown): boolean =>
  error instanceof GraphQLError && (error.originalError == null || isOriginalGraphQLError(error.originalError));

/** yoga's status: the largest errors ask for (`http.spec` keeps 200 under `json`), 500 if unexpected with no data. */
export function statusOf(result: ExecutionResult, headers: Map<string, string>, json: boolean): number {
  const answerHttp = httpOf(result);
  for (const [name, value] of Object.entries(answerHttp?.headers ?? {})) headers.set(name.toLowerCase(), value);
  let status = answerHttp?.status || undefined;
  let unexpected = false;
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

/** Whether a JSON answer keeps 200 for a request error the spec answers 200 for (yoga's rule, as written below). */
export function jsonKeepsSpecStatus(result: ExecutionResult): boolean {
  const { errors = [] } = result;
  return (
    errors.some((error) => error instanceof GraphQLError) &&
    errors.some((error) => {
      const original = (error.extensions as { originalError?: unknown } | undefined)?.originalError;
      return original === undefined || original instanceof GraphQLError;
    })
  );
}
