import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { requestStateOf } from '../request-state.js';

export interface BatchingOptions {
  /** Operations one batched request may carry. */
  readonly maxBatch: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * Batched requests (a JSON array of operations in one POST, as Apollo's BatchHttpLink sends):
 * a batch over `maxBatch` operations (or an empty one) is HTTP 400 with code BATCH_TOO_LARGE
 * (BAD_REQUEST; `limit: "batch"`), before any operation runs. yoga's own limit, set to the same number, would answer
 * 413 with BAD_REQUEST; this check runs first. A batch of two or more gets the request's shared
 * loaders (loaders/request-batch.ts), on its request state.
 */
export function useBatching(options: BatchingOptions): Plugin {
  const { maxBatch } = options;
  return {
    onRequestParse: ({ serverContext }) => ({
      onRequestParseDone({ requestParserResult }) {
        if (!Array.isArray(requestParserResult)) return;
        if (requestParserResult.length > maxBatch) {
          options.onRefused?.();
          throw createGraphQLError(`A batch may carry at most ${maxBatch} operations; this one has ${requestParserResult.length}.`, {
            extensions: { code: 'BATCH_TOO_LARGE', limit: 'batch', maxBatch, http: { status: 400 } },
          });
        }
        if (requestParserResult.length === 0) {
          throw createGraphQLError('A batch needs at least one operation.', { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } });
        }
        const state = requestStateOf(serverContext);
        if (state === undefined) return;
        state.batched = true;
        if (requestParserResult.length > 1) state.startBatch();
      },
    }),
  };
}
