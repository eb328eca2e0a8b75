import type { OperationName } from '../domain/operations.js';
import { UpstreamError, type UpstreamErrorCode } from './errors.js';
import type { Route } from './routes.js';

/** How one attempt failed, as the client will read it, and whether a GET may try again. */
export class Failure {
  constructor(
    readonly code: UpstreamErrorCode,
    readonly status: number | undefined,
    readonly retryable: boolean,
    readonly extra: {
      details?: UpstreamError['details'];
      reason?: string;
      cause?: unknown;
      /** Cut by its caller (the client went away, the operation's deadline), not failed by the upstream. */
      cutShort?: boolean;
      /**
       * An open breaker refused it (circuits.ts), or the upstream answered 429: how long until a call could be sent.
       */
      retryAfterMs?: number;
      /** An open breaker refused it: the host's (the upstream unreachable) or its operation's. */
      circuit?: 'host' | 'operation';
    } = {},
  ) {}

  /** The same failure, never tried again (the retry limit, the retry budget or an open breaker said no). */
  final(): Failure {
    return this.retryable ? new Failure(this.code, this.status, false, this.extra) : this;
  }
}

/**
 * Whether a failed attempt says the upstream is failing, for its circuit breakers: a 5xx, no
 * answer in the call's own time, or no connection. A 4xx is an answer (the upstream works); a
 * call its caller cut short says nothing of the upstream (see `Failure.extra.cutShort`); an
 * answer off the contract or too large is the body's fault, not the service's availability.
 */
export function isUpstreamFault(failure: Failure): boolean {
  if (failure.extra.cutShort === true) return false;
  if (failure.status !== undefined) return failure.status >= 500;
  return (
    failure.code === 'UPSTREAM_TIMEOUT' ||
    failure.code === 'UPSTREAM_UNAVAILABLE' ||
    failure.code === 'UPSTREAM_OUTCOME_UNKNOWN'
  );
}

/** Connection failures that mean "nobody answered" rather than "the answer was bad". */
const unavailableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const errorCodeOf = (error: unknown) => (error as { code?: unknown } | null | undefined)?.code;

/**
 * Whether an upstream fault is the connection's (refused, reset, no route, no name): the host is
 * down for every operation, not one route failing. A change's lost connection
 * (UPSTREAM_OUTCOME_UNKNOWN) is one too; a timeout is not (the call's own, of its route).
 */
export function isConnectionFault(failure: Failure): boolean {
  if (
    failure.extra.cutShort === true ||
    (failure.code !== 'UPSTREAM_UNAVAILABLE' && failure.code !== 'UPSTREAM_OUTCOME_UNKNOWN')
  )
    return false;
  const code = errorCodeOf(failure.extra.cause);
  return typeof code === 'string' && unavailableCodes.has(code);
}
const timeoutCodes = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/**
 * Failures that leave no doubt the request was never sent: no connection was made (refused, no
 * route, no name, connect timeout) or the pool was closed. Anything else may come after the
 * request was written (a reset, the socket closed under a sent request, no answer in time).
 */
const neverSentCodes = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/**
 * How a call's time ran out, if it did: while it waited for a connection of the pool, and whether the operation's
 * deadline came first.
 */
export interface CallTimeout {
  readonly aborted: boolean;
  readonly queued: boolean;
  readonly deadlineFirst: boolean;
}

/**
 * What an attempt that threw means: the gateway's own pool without a connection for it in time
 * (OVERLOADED: unsent, no fault of the upstream's), a timeout (the call's own, or the operation's
 * deadline when that came first), the client gone (`callerSignal`), nobody answering
 * (`retryCodes` may be tried again), or a fault.
 */
export function classifyThrown(
  error: unknown,
  timeout: CallTimeout,
  callerSignal: AbortSignal | undefined,
  retryCodes: readonly string[],
): Failure {
  if (timeout.aborted && timeout.queued && !timeout.deadlineFirst)
    return new Failure('OVERLOADED', undefined, false, {
      reason: 'no upstream connection in time',
      cause: error,
      cutShort: true,
    });
  if (timeout.aborted)
    return new Failure(
      'UPSTREAM_TIMEOUT',
      undefined,
      false,
      timeout.deadlineFirst ? { reason: 'operation deadline', cause: error, cutShort: true } : { cause: error },
    );
  if (callerSignal?.aborted) return new Failure('ABORTED', undefined, false, { cause: error, cutShort: true });
  const code = errorCodeOf(error);
  if (typeof code === 'string') {
    if (timeoutCodes.has(code)) return new Failure('UPSTREAM_TIMEOUT', undefined, false, { cause: error });
    if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE')
      return new Failure('UPSTREAM_ERROR', undefined, false, { reason: 'the body is too large', cause: error });
    if (unavailableCodes.has(code))
      return new Failure('UPSTREAM_UNAVAILABLE', undefined, retryCodes.includes(code), { cause: error });
  }
  return new Failure('UPSTREAM_ERROR', undefined, false, { cause: error });
}

/**
 * A change's failure as the client must read it: a timeout or a lost connection that may have
 * come after the request was written is UPSTREAM_OUTCOME_UNKNOWN (the change may have been
 * applied); UPSTREAM_UNAVAILABLE stays only for failures that prove it never left.
 */
export function outcomeOfChange(failure: Failure, error: unknown): Failure {
  if (failure.code !== 'UPSTREAM_TIMEOUT' && failure.code !== 'UPSTREAM_UNAVAILABLE') return failure;
  const code = errorCodeOf(error);
  if (failure.code === 'UPSTREAM_UNAVAILABLE' && typeof code === 'string' && neverSentCodes.has(code)) return failure;
  const reason = failure.code === 'UPSTREAM_TIMEOUT' ? 'no answer in time' : 'the connection closed';
  return new Failure('UPSTREAM_OUTCOME_UNKNOWN', undefined, false, {
    reason,
    cause: failure.extra.cause,
    ...(failure.extra.cutShort ? { cutShort: true } : {}),
  });
}

/** A call's failure as the error its caller gets. */
export function errorOf(failure: Failure, operation: OperationName, route: Route): UpstreamError {
  return new UpstreamError({
    code: failure.code,
    operation,
    method: route.method,
    path: route.path,
    status: failure.status,
    ...failure.extra,
  });
}
