import type { OperationName } from '../domain/operations.js';
import type { UpstreamErrorCode } from './errors.js';

/**
 * A per-operation gate on upstream calls (budget, stop after a 401). The transport asks it
 * before every attempt, retries included, and tells it how each attempt ended.
 */
export interface CallGuard {
  /** A code refuses the attempt: it is not sent. */
  admit(operation: OperationName): UpstreamErrorCode | undefined;
  settled(operation: OperationName, code: UpstreamErrorCode | undefined): void;
  /**
   * Milliseconds left before the operation's deadline, if it has one: a call's timeout is cut to
   * it, and a call the deadline cuts fails as UPSTREAM_TIMEOUT ("operation deadline").
   */
  remainingMs?(): number;
}
