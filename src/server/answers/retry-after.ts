import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { retryAfterMsOf } from '../../schema/errors.js';

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
 * The result with its `Retry-After`, if it has one (`retryAfterSecondsOf`): in its
 * `extensions.http`, which yoga's result processor makes headers of and leaves out of the body.
 * The pipeline's answers get it here (useRetryAfter), the lane's as they are processed (lane.ts).
 */
export function withRetryAfter<R extends ExecutionResult>(result: R): R {
  const seconds = retryAfterSecondsOf(result);
  if (seconds === undefined) return result;
  const http = (result.extensions?.['http'] ?? {}) as { headers?: Record<string, string> };
  return { ...result, extensions: { ...result.extensions, http: { ...http, headers: { ...http.headers, 'Retry-After': String(seconds) } } } };
}

/** `Retry-After` on an answer of one operation wholly refused by open breakers or the upstream's rate (a batch's answer carries none). */
export function useRetryAfter(): Plugin {
  return {
    onExecutionResult({ result, setResult }) {
      if (result === undefined || Array.isArray(result) || Symbol.asyncIterator in result) return;
      const answered = withRetryAfter(result);
      if (answered !== result) setResult(answered);
    },
  };
}
