import type { OperationName } from '../domain/operations.js';
import type { HttpMethod } from './routes.js';
import type { ValidationDetail } from './schemas.js';

/**
 * What went wrong with an upstream call, as one code the schema edge maps to a GraphQL error.
 * `ABORTED` is the caller's own cancellation (the client went away); it is not the upstream's
 * fault and is never retried. A change (POST, PATCH, DELETE) that never reached the upstream is
 * `UPSTREAM_UNAVAILABLE`; one that was sent and whose answer was lost or late is
 * `UPSTREAM_OUTCOME_UNKNOWN`: it may have been applied. `UPSTREAM_BUDGET_EXCEEDED` is a call the operation's budget
 * refused: it was never sent. `OVERLOADED` is a call that waited in the gateway's own pool for a
 * connection as long as a call may take: it was never sent, and says nothing of the upstream.
 */
export type UpstreamErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'BAD_USER_INPUT'
  | 'UPSTREAM_TIMEOUT'
  | 'UPSTREAM_UNAVAILABLE'
  | 'UPSTREAM_OUTCOME_UNKNOWN'
  | 'UPSTREAM_ERROR'
  | 'UPSTREAM_BUDGET_EXCEEDED'
  | 'OVERLOADED'
  | 'ABORTED';

export interface UpstreamErrorInit {
  code: UpstreamErrorCode;
  operation: OperationName;
  method: HttpMethod;
  /** The route's path template (`/heads/{head_id}`): never the host, never a token. */
  path: string;
  status?: number | undefined;
  details?: readonly ValidationDetail[] | undefined;
  reason?: string | undefined;
  /** An open breaker refused the call, or the upstream's 429 said: how long until a call could be sent. */
  retryAfterMs?: number | undefined;
  /** An open breaker refused the call: the host's (the upstream unreachable) or its operation's. */
  circuit?: 'host' | 'operation' | undefined;
  cause?: unknown;
}

/**
 * The reason of an UPSTREAM_UNAVAILABLE an open circuit breaker answered (the host's or the operation's): nothing was
 * sent.
 */
export const CIRCUIT_OPEN = 'circuit open';
/**
 * The reason of an UPSTREAM_UNAVAILABLE the upstream answered 429: it refused the call for its rate, nothing was
 * applied.
 */
export const RATE_LIMITED = 'rate limited';

const describe: Record<UpstreamErrorCode, (init: UpstreamErrorInit) => string> = {
  UNAUTHENTICATED: (e) => `Upstream refused the credentials (${e.status})`,
  FORBIDDEN: (e) => `Upstream denied permission (${e.status})`,
  NOT_FOUND: (e) => `Upstream has no such resource (${e.status})`,
  BAD_USER_INPUT: (e) => `Upstream rejected the input (${e.status})`,
  UPSTREAM_TIMEOUT: (e) => `Upstream did not answer in time${e.reason ? ` (${e.reason})` : ''}`,
  UPSTREAM_UNAVAILABLE: (e) => {
    if (e.reason === RATE_LIMITED)
      return 'Upstream is limiting the rate of calls: it refused this one and applied nothing; safe to retry later';
    if (e.reason !== CIRCUIT_OPEN) return 'Upstream could not be reached';
    return e.circuit === 'host'
      ? 'Upstream is unreachable: its circuit breaker is open and the call was not sent; safe to retry later'
      : `Upstream operation ${e.operation} is failing: its circuit breaker is open and the call was not sent; safe to retry later`;
  },
  UPSTREAM_OUTCOME_UNKNOWN: (e) =>
    `Upstream received the change but its answer was lost${e.reason ? ` (${e.reason})` : ''}: it may have been applied`,
  UPSTREAM_ERROR: (e) =>
    `Upstream failed${e.status === undefined ? '' : ` with status ${e.status}`}${e.reason ? ` (${e.reason})` : ''}`,
  UPSTREAM_BUDGET_EXCEEDED: () => 'Upstream call budget of this operation exhausted; call not sent',
  OVERLOADED: () =>
    'The gateway had no free connection to the upstream in time: the call was not sent; safe to retry later',
  ABORTED: () => 'Upstream call was cancelled',
};

/**
 * The one error type of the upstream layer. Its message says what happened and nothing of the
 * upstream (no address, route, method, body or token), so it is safe to show to clients; the
 * method and route template are fields, for logs and metrics only.
 */
export class UpstreamError extends Error {
  override name = 'UpstreamError';
  readonly code: UpstreamErrorCode;
  readonly operation: OperationName;
  readonly method: HttpMethod;
  readonly path: string;
  readonly status: number | undefined;
  readonly details: readonly ValidationDetail[];
  /** Why, in a few words, when the code alone does not say (`circuit open`, `operation deadline`). */
  readonly reason: string | undefined;
  readonly retryAfterMs: number | undefined;
  readonly circuit: 'host' | 'operation' | undefined;

  constructor(init: UpstreamErrorInit) {
    super(describe[init.code](init), { cause: init.cause });
    this.code = init.code;
    this.operation = init.operation;
    this.method = init.method;
    this.path = init.path;
    this.status = init.status;
    this.details = init.details ?? [];
    this.reason = init.reason;
    this.retryAfterMs = init.retryAfterMs;
    this.circuit = init.circuit;
  }
}

/** The code an upstream HTTP status maps to (issue "Foundation", point 5). */
export function codeForStatus(status: number): UpstreamErrorCode {
  if (status === 401) return 'UNAUTHENTICATED';
  if (status === 403) return 'FORBIDDEN';
  if (status === 404) return 'NOT_FOUND';
  if (status === 422) return 'BAD_USER_INPUT';
  if (status === 429) return 'UPSTREAM_UNAVAILABLE';
  return 'UPSTREAM_ERROR';
}
