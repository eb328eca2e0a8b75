import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { requestStateOf } from '../request-state.js';

export interface ResponseSizeLimitOptions {
  /** Largest answer one request gets, in bytes of JSON (a batch's answers together). */
  readonly maxBytes: number;
  /** Told of every answer replaced, for metrics. */
  readonly onRefused?: () => void;
  /** Told of every answer not serialised because its client had hung up, for metrics. */
  readonly onAbandoned?: () => void;
}

export type Stringify = (result: unknown) => string;

const tooLarge = (maxBytes: number): string =>
  JSON.stringify({
    errors: [
      createGraphQLError(`The answer is larger than ${maxBytes} bytes. Ask for smaller pages, fewer fields or fewer aliases.`, {
        extensions: { code: 'RESULT_TOO_LARGE', limit: 'response_bytes', maxResponseBytes: maxBytes },
      }),
    ],
  });

/** Nobody reads it: the client hung up before its answer was written. */
const clientGone = () => ({ errors: [createGraphQLError('The client closed the request.', { extensions: { code: 'CLIENT_CLOSED_REQUEST' } })] });

/** The answer's JSON, or the refusal that replaces it when it weighs more than `room` bytes. */
function limited(text: string, room: number, maxBytes: number, onRefused: (() => void) | undefined): { text: string; bytes: number } {
  const bytes = Buffer.byteLength(text);
  if (bytes <= room) return { text, bytes };
  onRefused?.();
  return { text: tooLarge(maxBytes), bytes: 0 };
}

/**
 * Bounds one answer (not a batch's) where its serialiser writes it: `stringify` (graphql-jit's
 * compiled one, or JSON's) as the refusal replaces it past `maxBytes`. The pipeline's plugin and
 * the lane's hot queries (lane.ts) bound their answers with it.
 */
export function boundedStringify(stringify: Stringify, maxBytes: number, onRefused: (() => void) | undefined): Stringify {
  return (value) => limited(stringify(value), maxBytes, maxBytes, onRefused).text;
}

/**
 * The backstop behind the result items limit (documents/upstream-plan.ts), which bounds answers
 * before execution from what the operation asks for: an answer whose JSON passes `maxBytes`
 * anyway (large values the upstream sent) is replaced by an error, code RESULT_TOO_LARGE with
 * `limit: "response_bytes"`. A batch's answers count together, in batch order: those written
 * before the limit was passed keep theirs. An answer whose client has hung up is not serialised
 * at all.
 *
 * It wraps the `stringify` yoga's JSON result processor calls for each result (graphql-jit's
 * compiled one, when the query was compiled), so the check costs a byte count per answer and no
 * second serialisation. The wrapper holds nothing of the request (a result that keeps its
 * request reachable costs every request a promotion: docs/performance.md#measured-reasons). Incremental answers (@defer/@stream parts) are bounded by the items limit alone.
 */
export function useResponseSizeLimit(options: ResponseSizeLimitOptions): Plugin {
  const { maxBytes, onRefused } = options;
  return {
    onExecutionResult({ result, context, setResult }) {
      const request = (context as { request?: Request }).request;
      if (request === undefined || result === undefined || Symbol.asyncIterator in result) return;
      if (request.signal.aborted) {
        options.onAbandoned?.();
        setResult(clientGone());
        return;
      }
      const target = result as { stringify?: Stringify };
      const stringify = target.stringify ?? JSON.stringify;
      const batch = requestStateOf(context)?.batch;
      if (batch === undefined) {
        target.stringify = boundedStringify(stringify, maxBytes, onRefused);
        return;
      }
      // A batch's answers are written one after another, into one body, once all have run.
      target.stringify = (value) => {
        if (batch.aborted()) {
          options.onAbandoned?.();
          return JSON.stringify(clientGone());
        }
        const answer = limited(stringify(value), maxBytes - batch.answeredBytes, maxBytes, onRefused);
        batch.answeredBytes += answer.bytes;
        return answer.text;
      };
    },
  };
}
