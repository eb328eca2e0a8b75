import type { HttpMethod, OperationName } from './routes.js';
import type { ValidationDetail } from './schemas.js';

/**
 * What went wrong with an upstream call, as one code the schema edge maps to a GraphQL error.
 * `ABORTED` is the caller's own cancellation (the client went away); it is not the upstream's
 * fault and is never retried. `UPSTREAM_BUDGET_EXCEEDED` is a call the operation's budget
 * refused: it was never sent.
 */
export type UpstreamErrorCode =
  | 'UNAUTHENTICATED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'BAD_USER_INPUT'
  | 'UPSTREAM_TIMEOUT'
  | 'UPSTREAM_UNAVAILABLE'
  | 'UPSTREAM_ERROR'
  | 'UPSTREAM_BUDGET_EXCEEDED'
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
  cause?: unknown;
}

const describe: Record<UpstreamErrorCode, (init: UpstreamErrorInit) => string> = {
  UNAUTHENTICATED: (e) => `Upstream refused the credentials (${e.status})`,
  FORBIDDEN: (e) => `Upstream denied permission (${e.status})`,
  NOT_FOUND: (e) => `Upstream has no such resource (${e.status})`,
  BAD_USER_INPUT: (e) => `Upstream rejected the input (${e.status})`,
  UPSTREAM_TIMEOUT: (e) => `Upstream did not answer in time${e.reason ? ` (${e.reason})` : ''}`,
  UPSTREAM_UNAVAILABLE: () => 'Upstream could not be reached',
  UPSTREAM_ERROR: (e) => `Upstream failed${e.status === undefined ? '' : ` with status ${e.status}`}${e.reason ? ` (${e.reason})` : ''}`,
  UPSTREAM_BUDGET_EXCEEDED: () => 'Upstream call budget of this operation exhausted; call not sent',
  ABORTED: () => 'Upstream call was cancelled',
};

/**
 * The one error type of the upstream layer. Its message names the operation and the path
 * template, never the upstream address, a body or a token, so it is safe to show to clients.
 */
export class UpstreamError extends Error {
  override name = 'UpstreamError';
  readonly code: UpstreamErrorCode;
  readonly operation: OperationName;
  readonly method: HttpMethod;
  readonly path: string;
  readonly status: number | undefined;
  readonly details: readonly ValidationDetail[];

  constructor(init: UpstreamErrorInit) {
    super(`${describe[init.code](init)}: ${init.method} ${init.path}`, { cause: init.cause });
    this.code = init.code;
    this.operation = init.operation;
    this.method = init.method;
    this.path = init.path;
    this.status = init.status;
    this.details = init.details ?? [];
  }
}

/** The code an upstream HTTP status maps to (issue "Foundation", point 5). */
export function codeForStatus(status: number): UpstreamErrorCode {
  if (status === 401) return 'UNAUTHENTICATED';
  if (status === 403) return 'FORBIDDEN';
  if (status === 404) return 'NOT_FOUND';
  if (status === 422) return 'BAD_USER_INPUT';
  return 'UPSTREAM_ERROR';
}
