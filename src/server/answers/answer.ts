import { type ExecutionResult, GraphQLError } from 'graphql';
import { createGraphQLError, isAsyncIterable } from 'graphql-yoga';
import { jsonKeepsSpecStatus, serialise, statusOf } from '../http/serialisation.js';
import type { Answer, Policy } from '../pipeline/stages.js';
import { type OperationResult, type RequestState, stopParts } from '../request-state.js';
import { negotiationOf, notAcceptable } from './negotiation.js';
import { framings, partsBody, type StreamOptions } from './parts.js';

export interface AnswerOptions {
  /** Largest answer one request gets, in bytes of JSON (a batch's answers together): MAX_RESPONSE_BYTES. */
  readonly maxBytes: number;
  /** Told of every answer the size limit replaced, for metrics. */
  readonly onRefused?: () => void;
  /** Told of every answer not serialised because its client had hung up, for metrics. */
  readonly onAbandoned?: () => void;
  /**
   * How often a stream gets a heartbeat, and who is told of one cut because its client read nothing for a while
   * (metrics).
   */
  readonly stream: StreamOptions;
}

const tooLarge = (maxBytes: number): string =>
  serialise({
    errors: [
      createGraphQLError(
        `The answer is larger than ${maxBytes} bytes. Ask for smaller pages, fewer fields or fewer aliases.`,
        {
          extensions: { code: 'RESULT_TOO_LARGE', limit: 'response_bytes', maxResponseBytes: maxBytes },
        },
      ),
    ],
  });

/** Nobody reads it: the client hung up before its answer was written. */
const clientGone = serialise({
  errors: [createGraphQLError('The client closed the request.', { extensions: { code: 'CLIENT_CLOSED_REQUEST' } })],
});

/** A single result in parts (a client that takes only multipart/mixed or an event stream): one part. */
async function* onePart(result: ExecutionResult): AsyncGenerator<ExecutionResult> {
  yield result;
}

/** A result's JSON, or the refusal that replaces it when it weighs more than `room` bytes. */
function bounded(options: AnswerOptions, json: string, room: number): { json: string; bytes: number } {
  const bytes = Buffer.byteLength(json);
  if (bytes <= room) return { json, bytes };
  options.onRefused?.();
  return { json: tooLarge(options.maxBytes), bytes: 0 };
}

/** What an answer whose client has hung up gets instead of its results, counted. */
function abandoned(options: AnswerOptions): string {
  options.onAbandoned?.();
  return clientGone;
}

/**
 * A single result (or a refusal) as the client takes it: in parts of one, or whole in the negotiated type, its JSON
 * (`cachedJson` when the response cache answered it) bounded by `maxBytes`.
 */
function whole(
  options: AnswerOptions,
  request: RequestState,
  answer: Answer,
  result: ExecutionResult,
  cachedJson: string | undefined,
): void {
  const type = negotiationOf(request).whole;
  if (type === undefined) {
    notAcceptable(answer);
    return;
  }
  if (type === 'multipart/mixed' || type === 'text/event-stream') {
    inParts(
      answer,
      type,
      onePart(result),
      statusOf(result, answer.headers, type === 'text/event-stream'),
      options.stream,
    );
    return;
  }
  answer.status = statusOf(result, answer.headers, type === 'application/json' && jsonKeepsSpecStatus(result));
  answer.headers.set('content-type', `${type}; charset=utf-8`);
  answer.body = request.gone
    ? abandoned(options)
    : bounded(options, cachedJson ?? serialise(result), options.maxBytes).json;
}

/** A batch's results as one JSON array, bounded together by `maxBytes` in batch order. */
function batch(
  options: AnswerOptions,
  request: RequestState,
  answer: Answer,
  results: readonly ExecutionResult[],
): void {
  const type = negotiationOf(request).whole;
  if (type === undefined) {
    notAcceptable(answer);
    return;
  }
  answer.headers.set(
    'content-type',
    `${type === 'multipart/mixed' || type === 'text/event-stream' ? 'application/json' : type}; charset=utf-8`,
  );
  if (request.gone) {
    for (let i = 1; i < results.length; i++) options.onAbandoned?.();
    answer.body = abandoned(options);
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

/**
 * The first step of the answer stage: the answer's media type (as the Accept header was
 * negotiated: answers/negotiation.ts), its status (http/serialisation.ts, GraphQL over HTTP's rules)
 * and its body, each result serialised once (http/serialisation.ts), bounded by `maxBytes`
 * (the backstop behind the result items limit: an answer whose JSON passes it anyway is replaced
 * by RESULT_TOO_LARGE, `limit: "response_bytes"`; a batch's answers count together, in batch
 * order), never serialised once its client has hung up. Refusals of the intake stage are answered
 * the same way (a whole answer of a step's as it is); parts (@defer, @stream) are framed as they
 * come (answers/parts.ts), bounded by the items limit alone.
 */
export function useAnswerBody(options: AnswerOptions): Policy {
  return {
    name: 'answer body',
    answer(request, answer) {
      const { refusal, operations } = request;
      if (refusal !== undefined && !(refusal instanceof GraphQLError)) {
        answer.status = refusal.status;
        for (const [name, value] of Object.entries(refusal.headers)) answer.headers.set(name.toLowerCase(), value);
        answer.body = refusal.body;
        return;
      }
      if (refusal !== undefined) return whole(options, request, answer, { errors: [refusal] }, undefined);
      const results = operations.map((operation) => operation.result as OperationResult);
      // A batch's operations run without @defer and @stream (answers/negotiation.ts): each result is whole.
      if (request.batched) return batch(options, request, answer, results as ExecutionResult[]);
      const [result] = results;
      if (!isAsyncIterable(result)) return whole(options, request, answer, result!, operations[0]!.cached?.json);
      const type = negotiationOf(request).parts;
      if (type !== 'multipart/mixed' && type !== 'text/event-stream') {
        // Not reached while the negotiation leaves @defer and @stream out for such a client: stopped all the same.
        stopParts(result);
        return notAcceptable(answer);
      }
      // A stream (a subscription, a live query) to a client that speaks Apollo's multipart subscriptions: in their
      // format.
      const apollo =
        type === 'multipart/mixed' && request.negotiated?.subscriptionSpec === true && operations[0]!.streams;
      return inParts(answer, apollo ? 'apollo subscription' : type, result, 200, options.stream);
    },
  };
}

/** An answer in parts: framed as its type says, each part serialised as it comes. */
function inParts(
  answer: Answer,
  type: keyof typeof framings,
  parts: AsyncIterable<ExecutionResult>,
  status: number,
  stream: StreamOptions,
): void {
  const framing = framings[type];
  answer.status = status;
  for (const [name, value] of Object.entries(framing.headers)) answer.headers.set(name, value);
  answer.body = partsBody(parts, framing, stream);
}
