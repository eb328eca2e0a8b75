import type { UpstreamErrorCode } from './errors.js';
import { OperationDeadline, type CallGuard } from './transport.js';

export interface OperationGuardOptions {
  /** Upstream call attempts the operation may make, retries included. */
  readonly budget: number;
  /** One deadline for every upstream call of the operation. */
  readonly deadlineMs: number;
  /** The incoming request's signal: a client that disconnects cancels its upstream calls. */
  readonly clientSignal?: AbortSignal | undefined;
}

/**
 * What one GraphQL operation may do to the upstream: a budget of calls counted as they are made,
 * one deadline shared by all of them, and no further calls once the upstream said 401 (the
 * token is bad for every one of them, and hammering an auth wall helps nobody).
 */
export class OperationGuard implements CallGuard {
  /** Aborts every pending call of the operation: deadline (OperationDeadline) or client gone. */
  readonly signal: AbortSignal;
  #calls = 0;
  #unauthenticated = false;
  #budgetRefusals = 0;
  readonly #budget: number;

  constructor(options: OperationGuardOptions) {
    this.#budget = options.budget;
    const deadline = AbortSignal.timeout(options.deadlineMs);
    const deadlineSignal = new AbortController();
    // AbortSignal.timeout's own reason is a DOMException; ours says which deadline it was.
    deadline.addEventListener('abort', () => deadlineSignal.abort(new OperationDeadline('operation deadline passed')), { once: true });
    this.signal = options.clientSignal ? AbortSignal.any([options.clientSignal, deadlineSignal.signal]) : deadlineSignal.signal;
  }

  /** Upstream calls sent so far (attempts, retries included). */
  get calls(): number {
    return this.#calls;
  }

  /** Calls the budget refused. */
  get budgetRefusals(): number {
    return this.#budgetRefusals;
  }

  admit(): UpstreamErrorCode | undefined {
    if (this.#unauthenticated) return 'UNAUTHENTICATED';
    if (this.#calls >= this.#budget) {
      this.#budgetRefusals++;
      return 'UPSTREAM_BUDGET_EXCEEDED';
    }
    this.#calls++;
    return undefined;
  }

  settled(_operation: string, code: UpstreamErrorCode | undefined): void {
    if (code === 'UNAUTHENTICATED') this.#unauthenticated = true;
  }
}
