import type { ExecutionResult } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import { retryAfterMsOf } from '../../schema/errors.js';
import type { Policy } from '../pipeline/stages.js';

/** `Retry-After` of an answer wholly refused by breakers or 429s (retried, a partial one would ask for what it has). */
function retryAfterSecondsOf({ errors, data }: ExecutionResult): number | undefined {
  if (errors === undefined || errors.length === 0) return undefined;
  if (data != null && Object.values(data).some((value) => value !== null)) return undefined;
  const waits = errors.map((error) => retryAfterMsOf(error));
  return waits.every((ms) => ms !== undefined) ? Math.ceil(Math.max(0, ...waits) / 1000) : undefined;
}

/** `retryAfterSecondsOf` into `extensions.http` (headers, not body) of an operation not batched, on masked errors. */
export const retryAfter: Policy = {
  name: 'retry after',
  result(operation) {
    const { result } = operation;
    if (result === undefined || operation.request.batched || isAsyncIterable(result)) return;
    const seconds = retryAfterSecondsOf(result);
    if (seconds === undefined) return;
    const http = (result.extensions?.http ?? {}) as { headers?: Record<string, string> };
    const headers = { ...http.headers, 'Retry-After': String(seconds) };
    operation.result = { ...result, extensions: { ...result.extensions, http: { ...http, headers } } };
  },
};
