import type { ExecutionResult } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import { retryAfterMsOf } from '../../schema/errors.js';
import type { Policy } from '../pipeline/stages.js';

/**
 * The `Retry-After` (whole seconds, rounded up) of an answer wholly refused by open upstream
 * breakers or the upstream's 429s that said when: every error is such a refusal and no root field
 * has a value; the latest of their times. An answer with anything else in it (a field served,
 * another error) carries none: a client retrying it as a whole would ask again for what it has.
 */
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

/**
 * `Retry-After` on an answer of one operation wholly refused by open breakers or the upstream's
 * rate (`retryAfterSecondsOf`; a batch's answer carries none): in its `extensions.http`, which the
 * answer's status rule makes headers of and its serialisation leaves out of the body
 * (http/serialisation.ts). A step of the result stage, on the masked errors.
 */
export const retryAfter: Policy = {
  name: 'retry after',
  result(operation) {
    const { result } = operation;
    if (result === undefined || operation.request.batched || isAsyncIterable(result)) return;
    const seconds = retryAfterSecondsOf(result);
    if (seconds === undefined) return;
    const http = (result.extensions?.http ?? {}) as { headers?: Record<string, string> };
    operation.result = {
      ...result,
      extensions: {
        ...result.extensions,
        http: { ...http, headers: { ...http.headers, 'Retry-After': String(seconds) } },
      },
    };
  },
};
