import { createGraphQLError } from 'graphql-yoga';
import type { Policy } from '../pipeline/stages.js';

export interface BatchingOptions {
  /** MAX_BATCH */
  readonly maxBatch: number;
  /** For metrics. */
  readonly onRefused?: () => void;
}

/** Batches (Apollo's BatchHttpLink) over `maxBatch`, or empty, refused before any runs; two or more share loaders. */
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
