import type { UpstreamErrorCode } from '../upstream/errors.js';
import type { OperationGuard } from '../upstream/operation-guard.js';
import type { CallGuard } from '../upstream/transport.js';
import type { RequestLoaders } from './request-loaders.js';

/**
 * What the operations of one batched request (a JSON array of operations in one POST) share: the
 * request's loaders, so a head two of them read costs one upstream call.
 *
 * Each operation keeps its own guard (budget, deadline); their plans share the batch's call
 * budget and items limit (`planned`), so a batch costs what one operation may. The shared
 * loaders call through the batch, which is a guard over the operations' guards: a read is
 * charged to the first operation, in batch order, whose guard admits it (so a shared read counts
 * once), runs until the latest deadline among them, and a 401 stops every operation (they carry
 * the same token).
 */
export class RequestBatch implements CallGuard {
  /**
   * What the batch's operations admitted so far plan to cost: one HTTP request shares one upstream
   * call budget and one result items limit (documents/upstream-plan.ts charges them).
   */
  readonly planned = { calls: 0, items: 0 };
  readonly #guards: OperationGuard[] = [];
  #loaders: RequestLoaders | undefined;

  /** The batch's loaders, made by the first operation that asks, calling through the batch. */
  loadersFor(guard: OperationGuard, make: (batchGuard: CallGuard) => RequestLoaders): RequestLoaders {
    this.#guards.push(guard);
    this.#loaders ??= make(this);
    return this.#loaders;
  }

  admit(): UpstreamErrorCode | undefined {
    let refusal: UpstreamErrorCode | undefined;
    for (const guard of this.#guards) {
      const code = guard.admit();
      if (code === undefined) return undefined;
      refusal ??= code;
    }
    return refusal;
  }

  settled(operation: Parameters<CallGuard['settled']>[0], code: UpstreamErrorCode | undefined): void {
    for (const guard of this.#guards) guard.settled(operation, code);
  }

  remainingMs(): number {
    let remaining = -Infinity;
    for (const guard of this.#guards) remaining = Math.max(remaining, guard.remainingMs());
    return remaining;
  }
}
