import { type ExecutionResult, GraphQLError } from 'graphql';
import { isAsyncIterable, mapAsyncIterator } from 'graphql-yoga';
import type { Logger } from 'pino';
import { errorLogEntry, maskError } from '../../schema/errors.js';
import type { Policy } from '../pipeline/stages.js';

/** What a client reads of an error the gateway did not mean it to see. */
const UNEXPECTED = 'Unexpected error.';

/**
 * Logs what an error masked was (schema/errors.ts: the gateway's own faults at error, upstream failures at warn, a
 * caller's mistakes at debug).
 */
export function logMasked(logger: Logger, error: unknown): void {
  const entry = errorLogEntry(error);
  if (entry !== undefined) logger[entry.level](entry.fields, entry.message);
}

/** The error execution stops with once its client hung up (its request's signal aborted), or a timer's. */
const isAbort = (error: unknown): boolean =>
  error instanceof Error &&
  (error.name === 'AbortError' || error.name === 'TimeoutError') &&
  !(error instanceof GraphQLError);

const clientGone = () =>
  new GraphQLError('The client closed the request.', { extensions: { code: 'CLIENT_CLOSED_REQUEST' } });

/**
 * A part of an answer in parts, as the executor writes them (2022-08-24): its own errors, and those of what it
 * delivers.
 */
type Part = ExecutionResult & { incremental?: readonly { errors?: readonly GraphQLError[] }[] };

/**
 * The one masking of errors (schema/errors.ts's `maskError`: upstream failures mapped to codes,
 * the gateway's own GraphQL errors kept, anything else "Unexpected error." with code
 * INTERNAL_SERVER_ERROR), each original it replaces logged once: `mask` for what a step threw (the
 * pipeline's), `result` for every operation's result however it came (run, refused, kept), each
 * part of a stream as it passes. An abort or a timeout is the client's CLIENT_CLOSED_REQUEST only
 * once its client is gone (`gone`); else it is masked as any other failure.
 */
export function errorMasking(
  logger: Logger,
): Policy & { readonly mask: (error: unknown, gone: boolean) => GraphQLError } {
  const mask = (error: unknown, gone: boolean): GraphQLError => {
    // What an operation whose client hung up stopped with: nothing of ours failed, and nobody reads it.
    if (gone && isAbort(error)) return clientGone();
    const masked = maskError(error, UNEXPECTED);
    if (masked !== error) logMasked(logger, error);
    return masked instanceof GraphQLError ? masked : new GraphQLError(masked.message, { originalError: masked });
  };
  const maskAll = (errors: readonly GraphQLError[], gone: boolean) => errors.map((error) => mask(error, gone));
  const maskPart = (part: Part, gone: boolean): Part => {
    const incremental = part.incremental?.some((entry) => entry.errors?.length)
      ? part.incremental.map((entry) =>
          entry.errors?.length ? { ...entry, errors: maskAll(entry.errors, gone) } : entry,
        )
      : part.incremental;
    return part.errors?.length || incremental !== part.incremental
      ? {
          ...part,
          ...(part.errors?.length ? { errors: maskAll(part.errors, gone) } : {}),
          ...(incremental !== part.incremental ? { incremental } : {}),
        }
      : part;
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
