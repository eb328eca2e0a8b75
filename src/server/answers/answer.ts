import { type ExecutionResult, GraphQLError } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import { refusalBody } from '../http/refusal.js';
import { jsonKeepsSpecStatus, serialise, statusOf } from '../http/serialisation.js';
import type { WholeAnswer } from '../incoming.js';
import type { Answer, Policy } from '../pipeline/stages.js';
import { type OperationResult, type RequestState, stopParts } from '../request-state.js';
import { negotiationOf, notAcceptableAnswer } from './negotiation.js';
import { framings, partsBody, type StreamOptions } from './parts.js';

export interface AnswerOptions {
  /** MAX_RESPONSE_BYTES, the backstop behind the result items limit: bytes of a request's JSON (a batch's together). */
  readonly maxBytes: number;
  /** For metrics: an answer the size limit replaced. */
  readonly onRefused?: () => void;
  /** For metrics: an answer not serialised because its client had hung up. */
  readonly onAbandoned?: () => void;
  readonly stream: StreamOptions;
}

const clientGone = refusalBody('The client closed the request.', 'CLIENT_CLOSED_REQUEST');

/** Makes `answer` the one given (a refusal's header names lower-cased). */
function answerWith(answer: Answer, { status, headers, body }: Omit<WholeAnswer, 'body'> & Pick<Answer, 'body'>) {
  answer.status = status;
  for (const [name, value] of Object.entries(headers)) answer.headers.set(name.toLowerCase(), value);
  answer.body = body;
}

/** An answer's headers and body in parts, framed as `type`'s. */
function inParts(type: keyof typeof framings, parts: AsyncIterable<ExecutionResult>, stream: StreamOptions) {
  const framing = framings[type];
  return { headers: framing.headers, body: partsBody(parts, framing, stream) };
}

async function* onePart(result: ExecutionResult): AsyncGenerator<ExecutionResult> {
  yield result;
}

/** A result's JSON, or the refusal that replaces it when it weighs more than `room` bytes. */
function bounded(options: AnswerOptions, json: string, room: number): { json: string; bytes: number } {
  const bytes = Buffer.byteLength(json);
  if (bytes <= room) return { json, bytes };
  options.onRefused?.();
  const { maxBytes } = options;
  const message = `The answer is larger than ${maxBytes} bytes. Ask for smaller pages, fewer fields or fewer aliases.`;
  const refusal = refusalBody(message, 'RESULT_TOO_LARGE', { limit: 'response_bytes', maxResponseBytes: maxBytes });
  return { json: refusal, bytes: 0 };
}

/** What an answer whose client hung up before it was written gets (nobody reads it), counted for each result. */
function abandoned(options: AnswerOptions, results = 1): string {
  for (let i = 0; i < results; i++) options.onAbandoned?.();
  return clientGone;
}

/** A single result (or a refusal): in parts of one, or whole, its JSON (`json` if cached) bounded by `maxBytes`. */
function whole(options: AnswerOptions, request: RequestState, answer: Answer, result: ExecutionResult, json?: string) {
  const type = negotiationOf(request).whole;
  if (type === undefined) return answerWith(answer, notAcceptableAnswer);
  if (type === 'multipart/mixed' || type === 'text/event-stream') {
    const status = statusOf(result, answer.headers, type === 'text/event-stream');
    return answerWith(answer, { status, ...inParts(type, onePart(result), options.stream) });
  }
  answer.status = statusOf(result, answer.headers, type === 'application/json' && jsonKeepsSpecStatus(result));
  answer.headers.set('content-type', `${type}; charset=utf-8`);
  answer.body = request.gone ? abandoned(options) : bounded(options, json ?? serialise(result), options.maxBytes).json;
}

/** A batch's results as one JSON array, bounded together by `maxBytes` in batch order. */
function batch(options: AnswerOptions, request: RequestState, answer: Answer, results: readonly ExecutionResult[]) {
  const type = negotiationOf(request).whole;
  if (type === undefined) return answerWith(answer, notAcceptableAnswer);
  const jsonType = type === 'multipart/mixed' || type === 'text/event-stream' ? 'application/json' : type;
  answer.headers.set('content-type', `${jsonType}; charset=utf-8`);
  if (request.gone) {
    answer.body = abandoned(options, results.length);
    return;
  }
  let room = options.maxBytes;
  const parts = results.map((result, i) => {
    const written = bounded(options, request.operations[i]?.cached?.json ?? serialise(result), room);
    room -= written.bytes;
    return written.json;
  });
  answer.body = `[${parts.join(',')}]`;
}

/** The answer stage's first step: media type, status and body, each result serialised once, bounded by `maxBytes`. */
export function useAnswerBody(options: AnswerOptions): Policy {
  return {
    name: 'answer body',
    answer(request, answer) {
      const { refusal, operations } = request;
      if (refusal instanceof GraphQLError) return whole(options, request, answer, { errors: [refusal] });
      if (refusal !== undefined) return answerWith(answer, refusal);
      const results = operations.map((operation) => operation.result as OperationResult);
      // A batch's operations run without @defer and @stream (answers/negotiation.ts): each result is whole.
      if (request.batched) return batch(options, request, answer, results as ExecutionResult[]);
      const [result] = results;
      if (!isAsyncIterable(result)) return whole(options, request, answer, result!, operations[0]!.cached?.json);
      const type = negotiationOf(request).parts;
      if (type !== 'multipart/mixed' && type !== 'text/event-stream') {
        // Not reached while the negotiation leaves @defer and @stream out for such a client: stopped all the same.
        stopParts(result);
        return answerWith(answer, notAcceptableAnswer);
      }
      // A stream (a subscription, a live query) to a client that speaks Apollo's multipart subscriptions: in theirs.
      const apollo =
        type === 'multipart/mixed' && request.negotiated?.subscriptionSpec === true && operations[0]!.streams;
      return answerWith(answer, {
        status: 200,
        ...inParts(apollo ? 'apollo subscription' : type, result, options.stream),
      });
    },
  };
}
