import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import { checkBody } from './body-check.js';
import type { CallCancellation } from './cancellation.js';
import { codeForStatus, RATE_LIMITED } from './errors.js';
import { Failure } from './failures.js';
import { validationErrorSchema } from './schemas.js';

/**
 * One exchange through undici's `dispatch()`: the answer's status and its body's bytes, whole
 * (undici enforces the pool's maxResponseSize as they arrive). undici's request API would wrap
 * every answer in a Readable stream to read it back with `body.json()` (its cost:
 * docs/performance.md#measured-reasons). A cancellation while the request waits for a connection
 * fails it at once (undici drops it unsent once it starts it); after, aborts it at once. It tells
 * the cancellation when it has a connection (`onConnected`).
 */
export function exchange(
  dispatcher: Dispatcher,
  request: Dispatcher.DispatchOptions,
  cancellation: CallCancellation,
): Promise<Exchanged> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let status = 0;
    let retryAfter: string | undefined;
    let controller: Dispatcher.DispatchController | undefined;
    // Cut while it waits for a connection, the call fails at once; the request is dropped unsent once one is free.
    const abort = () =>
      controller === undefined ? reject(cancellation.reason as Error) : controller.abort(cancellation.reason as Error);
    if (cancellation.aborted) return abort();
    cancellation.once('abort', abort);
    dispatcher.dispatch(request, {
      onRequestStart(started) {
        controller = started;
        if (cancellation.aborted) return started.abort(cancellation.reason as Error);
        cancellation.onConnected?.();
      },
      onResponseStart(_, statusCode, headers) {
        status = statusCode;
        if (statusCode === 429) retryAfter = headerValue(headers['retry-after']);
      },
      onResponseData(_, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        cancellation.off('abort', abort);
        resolve({ status, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), retryAfter });
      },
      onResponseError(_, error) {
        cancellation.off('abort', abort);
        reject(error);
      },
    });
  });
}

/** An answer as it came: its status, its body's bytes, and the `Retry-After` of a 429. */
export interface Exchanged {
  readonly status: number;
  readonly body: Buffer;
  readonly retryAfter?: string | undefined;
}

const headerValue = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

/** The longest wait an upstream's `Retry-After` is taken at: a later one is said as this. */
const MAX_RETRY_AFTER_MS = 3_600_000;

/**
 * A `Retry-After` (RFC 9110 10.2.3: delay-seconds, or an HTTP-date) in ms from now, at most an
 * hour; undefined when absent or unreadable.
 */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  // An HTTP-date begins with its day's name (all three of its forms); Date.parse alone reads "-5" as a year.
  const ms = /^\d+$/.test(trimmed)
    ? Number(trimmed) * 1000
    : /^[A-Za-z]/.test(trimmed)
      ? Date.parse(trimmed) - now
      : Number.NaN;
  return Number.isNaN(ms) ? undefined : Math.min(Math.max(0, Math.ceil(ms)), MAX_RETRY_AFTER_MS);
}

/** What a call expects of a successful answer. */
export interface ExpectedAnswer<T> {
  /** Schema of a successful body; none means the answer carries no body (204). */
  readonly schema?: z.ZodType<T> | undefined;
  /** A successful body that still means "no such resource" (an empty array for an id). */
  readonly notFoundWhen?: ((value: T) => boolean) | undefined;
}

/**
 * An answer read against the contract: a 2xx body parsed and checked with the operation's schema,
 * or the failure its status means (`retryStatuses` may be tried again), a 422 with the contract's
 * detail items (contract 7), a 429 with when to try again.
 */
export function readAnswer<T>(
  expected: ExpectedAnswer<T>,
  { status, body, retryAfter }: Exchanged,
  retryStatuses: readonly number[],
): { value: T; status: number } | Failure {
  const { schema } = expected;
  if (status >= 200 && status < 300) {
    if (schema === undefined) return { value: undefined as T, status };
    let json: unknown;
    try {
      json = parseJson(body);
    } catch (error) {
      return new Failure('UPSTREAM_ERROR', status, false, { reason: 'the body is not JSON', cause: error });
    }
    const parsed = checkBody(schema, json);
    if (!parsed.success)
      return new Failure('UPSTREAM_ERROR', status, false, { reason: 'the body is off-contract', cause: parsed.error });
    if (expected.notFoundWhen?.(parsed.data)) return new Failure('NOT_FOUND', status, false);
    return { value: parsed.data, status };
  }
  const code = codeForStatus(status);
  if (status === 429) {
    // Refused for its rate, not applied: not retried here (the upstream said when), not a fault for the breakers (a
    // 4xx).
    const ms = retryAfterMs(retryAfter);
    return new Failure(
      code,
      status,
      false,
      ms === undefined ? { reason: RATE_LIMITED } : { reason: RATE_LIMITED, retryAfterMs: ms },
    );
  }
  if (code === 'BAD_USER_INPUT') {
    // The detail items tell the client which input was wrong; an unreadable body still leaves a
    // 422, only without details.
    let detail: unknown;
    try {
      detail = parseJson(body);
    } catch {
      detail = undefined;
    }
    const details = validationErrorSchema.safeParse(detail);
    return new Failure(code, status, false, { details: details.success ? details.data.detail : [] });
  }
  return new Failure(code, status, retryStatuses.includes(status));
}

/** A body's JSON, read as UTF-8 with a leading byte order mark dropped (as `body.json()` reads it). */
function parseJson(body: Buffer): unknown {
  const bom = body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
  return JSON.parse(body.toString('utf8', bom ? 3 : 0));
}
