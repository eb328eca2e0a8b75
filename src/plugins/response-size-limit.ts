import { createGraphQLError, type Plugin } from 'graphql-yoga';

export interface ResponseSizeLimitOptions {
  /** Largest answer one request gets, in bytes of JSON (a batch's answers together). */
  readonly maxBytes: number;
  /** Told of every answer replaced, for metrics. */
  readonly onRefused?: () => void;
  /** Told of every answer not serialised because its client had hung up, for metrics. */
  readonly onAbandoned?: () => void;
}

type Stringify = (result: unknown) => string;

/** What a request's answers weighed so far (a batch's are written one after another). */
const written = new WeakMap<Request, { bytes: number }>();

const tooLarge = (maxBytes: number): string =>
  JSON.stringify({
    errors: [
      createGraphQLError(`The answer is larger than ${maxBytes} bytes. Ask for smaller pages, fewer fields or fewer aliases.`, {
        extensions: { code: 'RESULT_TOO_LARGE', limit: 'response_bytes', maxResponseBytes: maxBytes },
      }),
    ],
  });

/** Nobody reads it: the client hung up before its answer was written. */
const CLIENT_GONE = '{"errors":[{"message":"The client closed the request.","extensions":{"code":"CLIENT_CLOSED_REQUEST"}}]}';

/**
 * The backstop behind the result items limit (plugins/upstream-plan.ts), which bounds answers
 * before execution from what the operation asks for: an answer whose JSON passes `maxBytes`
 * anyway (large values the upstream sent) is replaced by an error, code RESULT_TOO_LARGE with
 * `limit: "response_bytes"`. A batch's answers count together, in batch order: those written
 * before the limit was passed keep theirs. An answer whose client has hung up is not serialised
 * at all.
 *
 * It wraps the `stringify` yoga's JSON result processor calls for each result (graphql-jit's
 * compiled one, when the query was compiled), so the check costs a byte count per answer and no
 * second serialisation. Incremental answers (@defer/@stream parts) are bounded by the items
 * limit alone.
 */
export function useResponseSizeLimit(options: ResponseSizeLimitOptions): Plugin {
  const { maxBytes } = options;
  return {
    onExecutionResult({ result, context }) {
      const request = (context as { request?: Request }).request;
      if (request === undefined || result === undefined || Symbol.asyncIterator in result) return;
      const target = result as { stringify?: Stringify };
      const stringify = target.stringify ?? JSON.stringify;
      target.stringify = (value) => {
        if (request.signal.aborted) {
          options.onAbandoned?.();
          return CLIENT_GONE;
        }
        const text = stringify(value);
        let sent = written.get(request);
        if (sent === undefined) written.set(request, (sent = { bytes: 0 }));
        const bytes = Buffer.byteLength(text);
        if (sent.bytes + bytes > maxBytes) {
          options.onRefused?.();
          return tooLarge(maxBytes);
        }
        sent.bytes += bytes;
        return text;
      };
    },
  };
}
