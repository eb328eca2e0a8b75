import { createGraphQLError } from 'graphql-yoga';
import type { Policy } from '../pipeline/stages.js';

export interface BatchingOptions {
  /** Operations one batched request may carry. */
  readonly maxBatch: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * Batched requests (a JSON array of operations in one POST, as Apollo's BatchHttpLink sends):
 * a batch over `maxBatch` operations (or an empty one) is HTTP 400 with code BATCH_TOO_LARGE
 * (BAD_REQUEST for an empty one; `limit: "batch"`), before any operation runs. A batch of two or
 * more gets the request's shared loaders (loaders/request-batch.ts), on its request state.
 */
export function useBatching(options: BatchingOptions): Policy {
  const { maxBatch } = options;
  return {
    name: 'batching',
    intake(request) {
      if (!request.batched) return undefined;
      const { length } = request.operations;
      if (length > maxBatch) {
        options.onRefused?.();
        return createGraphQLError(`A batch may carry at most ${maxBatch} operations; this one has ${length}.`, {
          extensions: { code: 'BATCH_TOO_LARGE', limit: 'batch', maxBatch, http: { status: 400 } },
        });
      }
      if (length === 0)
        return createGraphQLError('A batch needs at least one operation.', {
          extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
        });
      if (length > 1) request.startBatch();
      return undefined;
    },
  };
}
