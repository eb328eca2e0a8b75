import { type ExecutionResult, GraphQLError } from 'graphql';
import { isAsyncIterable, mapAsyncIterator } from 'graphql-yoga';
import type { Logger } from 'pino';
import { errorLogEntry, maskError } from '../../schema/errors.js';
import type { Policy } from '../pipeline/stages.js';

/** What execution stops with once its client hung up (the request's signal aborted), or a timer's. */
const isAbort = (error: unknown): boolean =>
  error instanceof Error &&
  (error.name === 'AbortError' || error.name === 'TimeoutError') &&
  !(error instanceof GraphQLError);

/** A part as the executor writes it (2022-08-24): its own errors, and those of what it delivers. */
type Part = ExecutionResult & { incremental?: readonly { errors?: readonly GraphQLError[] }[] };

/** The one masking, each original logged once: `mask` for what a step threw, `result` for results and stream parts. */
export function errorMasking(
  logger: Logger,
): Policy & { readonly mask: (error: unknown, gone: boolean) => GraphQLError } {
  const mask = (error: unknown, gone: boolean): GraphQLError => {
    // What an operation whose client hung up stopped with: nothing of ours failed, and nobody reads it.
    if (gone && isAbort(error))
      return new GraphQLError('The client closed the request.', { extensions: { code: 'CLIENT_CLOSED_REQUEST' } });
    const masked = maskError(error, 'Unexpected error.');
    // schema/errors.ts: our faults at error, upstream failures at warn, a caller's at debug.
    const entry = masked === error ? undefined : errorLogEntry(error);
    if (entry !== undefined) logger[entry.level](entry.fields, entry.message);
    return masked instanceof GraphQLError ? masked : new GraphQLError(masked.message, { originalError: masked });
  };
  const maskAll = (errors: readonly GraphQLError[], gone: boolean) => errors.map((error) => mask(error, gone));
  const maskPart = (part: Part, gone: boolean): Part => {
    if (!part.errors?.length && !part.incremental?.some((entry) => entry.errors?.length)) return part;
    const incremental = part.incremental?.map((entry) =>
      entry.errors?.length ? { ...entry, errors: maskAll(entry.errors, gone) } : entry,
    );
    const errors = part.errors?.length ? { errors: maskAll(part.errors, gone) } : {};
    return { ...part, ...errors, ...(incremental ? { incremental } : {}) };
  };
  return {
    name: 'masking',
    concerns: 'also events',
    mask,
    result(operation) {
      const { result, request } = operation;
      if (result === undefined) return;
      if (isAsyncIterable(result))
        operation.result = mapAsyncIterator(result, (part: Part) => maskPart(part, request.gone));
      else if (result.errors?.length) operation.result = { ...result, errors: maskAll(result.errors, request.gone) };
    },
  };
}
