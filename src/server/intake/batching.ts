import { createGraphQLError } from 'graphql-yoga';
import type { Policy } from '../pipeline/stages.js';
import { badRequest } from './params.js';

/** Batches (Apollo's BatchHttpLink) over MAX_BATCH, or empty, refused before any runs; two or more share loaders. */
export function useBatching(options: { readonly maxBatch: number; readonly onRefused?: () => void }): Policy {
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
      if (length === 0) return badRequest('A batch needs at least one operation.');
      if (length > 1) request.startBatch();
      return undefined;
    },
  };
}
