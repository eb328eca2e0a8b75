import type { ExecutionResult } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import { retryAfterMsOf } from '../../schema/errors.js';
import type { Policy } from '../pipeline/stages.js';

/** `Retry-After` of an answer wholly refused by breakers or 429s (retried, a partial one would ask for what it has). */
export function retryAfterSecondsOf(result: ExecutionResult): number | undefined {
  const { errors, data } = result;
  if (errors === undefined || errors.length === 0) return undefined;
  if (data != null && Object.values(data).some((value) => value !== null)) return undefined;
  let latestMs = 0;
  for (const error of errors) {
    const ms = retryAfterMsOf(error);
    if (ms === undefined) return undefined;
    latestMs = Math.max(latestMs, ms);
  }
  return Math.ceil(latestMs / 1000);
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
