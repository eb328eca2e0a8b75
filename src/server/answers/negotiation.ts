import { BREAK, type DocumentNode, type ExecutionResult, type GraphQLSchema, Kind, visit } from 'graphql';
import { createGraphQLError, isAsyncIterable, mapAsyncIterator } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import Negotiator from 'negotiator';
import { streamInitialCount } from '../documents/incremental-delivery.js';
import { plainDocumentOf } from '../documents/prepared.js';
import { codingsFor } from '../http/codings.js';
import { refusalBody, refusalType } from '../http/refusal.js';
import type { Negotiated, WholeAnswer } from '../incoming.js';
import type { Answer, Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import { alpha9Payloads, type Payload2022 } from './alpha9-payloads.js';
import { answerTypeFor } from './media-types.js';

/** The media types the gateway answers in, each with the only charset it writes. */
const mediaTypes = [
  'application/json',
  'application/graphql-response+json',
  'multipart/mixed',
  'text/event-stream',
].map((type) => `${type};charset=utf-8`);

const quality = /;\s*q\s*=/i;
const meaningfulParameter = /^\s*(q|charset)\s*=/i;
/** Apollo's name for graphql-js 17.0.0-alpha.9's incremental format (https://specs.apollo.dev/incremental/v0.2/). */
const alpha9Format = /^\s*multipart\/mixed\s*;(?:.*;)?\s*incrementalSpec\s*=\s*"?v0\.2"?\s*(?:;|$)/i;
/** Apollo's multipart subscriptions (Apollo Client's HttpLink, Apollo Kotlin and iOS; Apollo Router's protocol). */
const apolloSubscriptions = /^\s*multipart\/mixed\s*;(?:.*;)?\s*subscriptionSpec\s*=\s*"?1\.0"?\s*(?:;|$)/i;

/**
 * The media types of `accept` the gateway can answer in, most preferred first (negotiator: q-values,
 * `q=0` as "not this", the most specific range deciding). Parameters other than `charset` and `q`
 * are dropped first: yoga reads no other (Apollo's `multipart/mixed;deferSpec=20220824`), and
 * negotiator would take each as a condition no type of ours meets.
 */
function negotiate(accept: string): Negotiated {
  const ranges = accept.split(',');
  const trimmed = ranges
    .map((range) =>
      range
        .split(';')
        .filter((part, i) => i === 0 || meaningfulParameter.test(part))
        .join(';'),
    )
    .join(',');
  const types = new Negotiator({ headers: { accept: trimmed } })
    .mediaTypes(mediaTypes)
    .map((type) => type.slice(0, type.indexOf(';')));
  // With q-values, the answer's type is chosen from the types accepted, most preferred first.
  const chosenBy = quality.test(accept) ? types.join(', ') : accept;
  return {
    whole: answerTypeFor(chosenBy, false),
    parts: answerTypeFor(chosenBy, true),
    alpha9: types.includes('multipart/mixed') && ranges.some((range) => alpha9Format.test(range)),
    subscriptionSpec: types.includes('multipart/mixed') && ranges.some((range) => apolloSubscriptions.test(range)),
  };
}

/**
 * Clients send a handful of distinct Accept headers: each is negotiated once (256 kept at most, of
 * 256 characters at most: a longer one is negotiated each time).
 */
const known = new LRUCache<string, Negotiated>({ max: 256 });
const KEPT_LENGTH = 256;

/** What no Accept header (or an empty one) allows: anything. */
const anything = negotiate('*/*');

/** What a request's Accept header allows, negotiated when first asked. */
export function negotiationOf(request: RequestState): Negotiated {
  if (request.negotiated !== undefined) return request.negotiated;
  const accept = request.headers.get('accept');
  let negotiated = accept ? known.get(accept) : anything;
  if (negotiated === undefined) {
    negotiated = negotiate(accept!);
    if (accept!.length <= KEPT_LENGTH) known.set(accept!, negotiated);
  }
  request.negotiated = negotiated;
  return negotiated;
}

/**
 * The one answer to a client that takes no media type the gateway answers in (HTTP 406): plain JSON every client reads,
 * with its code.
 */
const notAcceptableAnswer: WholeAnswer = {
  status: 406,
  headers: {
    'content-type': refusalType,
    accept: 'application/graphql-response+json; charset=utf-8, application/json; charset=utf-8',
  },
  body: refusalBody(
    'The Accept header names no media type the gateway answers in: application/graphql-response+json or application/json, and multipart/mixed or text/event-stream for @defer and @stream.',
    'NOT_ACCEPTABLE',
  ),
};

/** The 406 to a client whose Accept-Encoding refuses every content coding the gateway writes (http/codings.ts). */
const noCodingAnswer: WholeAnswer = {
  status: 406,
  headers: { 'content-type': refusalType, vary: 'Accept-Encoding' },
  body: refusalBody(
    'The Accept-Encoding header refuses every content coding the gateway answers in: accept identity, br, gzip or deflate.',
    'NOT_ACCEPTABLE',
  ),
};

/**
 * Makes `answer` the 406, when its result has no type the client takes (answers/answer.ts): a
 * request refused before its negotiation (overloaded, say) whose client takes none.
 */
export function notAcceptable(answer: Answer): void {
  answer.status = notAcceptableAnswer.status;
  for (const [name, value] of Object.entries(notAcceptableAnswer.headers)) answer.headers.set(name, value);
  answer.body = notAcceptableAnswer.body;
}

/**
 * A subscription's answer (a live query's) is a stream: one asked for in a batch, or by a client that takes no stream,
 * is refused before it runs.
 */
function subscriptionRefusal(request: RequestState) {
  if (request.batched)
    return createGraphQLError('A subscription or live query cannot be sent in a batch: send it alone.', {
      extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
    });
  if (negotiationOf(request).parts !== undefined) return undefined;
  return createGraphQLError(
    'A subscription or live query is answered as a stream: send it with Accept: text/event-stream (GraphQL over SSE) or multipart/mixed (Apollo’s subscriptionSpec="1.0"), or over WebSocket (graphql-transport-ws) on this path.',
    { extensions: { code: 'NOT_ACCEPTABLE', http: { status: 406 } } },
  );
}

/** Whether an operation that uses @defer or @stream answers in parts: one its `if` does not turn off. */
function answersInParts(
  document: DocumentNode,
  variables: Readonly<Record<string, unknown>> | null | undefined,
): boolean {
  let parts = false;
  visit(document, {
    Directive(node) {
      if (node.name.value !== 'defer' && node.name.value !== 'stream') return undefined;
      const condition = node.arguments?.find((argument) => argument.name.value === 'if')?.value;
      const off =
        condition?.kind === Kind.BOOLEAN
          ? !condition.value
          : condition?.kind === Kind.VARIABLE && variables?.[condition.name.value] === false;
      if (off) return undefined;
      parts = true;
      return BREAK;
    },
  });
  return parts;
}

/**
 * The answer's media type, agreed before anything runs (HTTP's intake). yoga picked it after
 * execution, by the position of the types in Accept and without reading q-values: an operation a
 * client cannot take the answer of ran in full, upstream calls included, to be answered 406, and
 * `application/json;q=0` was answered in JSON. Here an Accept that names no type the gateway
 * answers in, or an Accept-Encoding that refuses every coding it writes, is HTTP 406
 * `NOT_ACCEPTABLE` before the body is read; else the types a whole answer and one in parts go out
 * in are chosen (yoga's choice, answers/media-types.ts, over the types accepted most preferred
 * first when the header has q-values), once per distinct header. What an operation is then
 * answered in is `useIncrementalDelivery`'s.
 */
export function useContentNegotiation(): Policy {
  return {
    name: 'content negotiation',
    intake: (request) =>
      negotiationOf(request).whole === undefined
        ? notAcceptableAnswer
        : codingsFor(request.headers.get('accept-encoding')) === 'none'
          ? noCodingAnswer
          : undefined,
  };
}

/**
 * What an operation is answered in, by what its request's transport carries (`negotiated`: an HTTP
 * request's Accept, a WebSocket's messages):
 * - document: a subscription or live query for a client that takes no stream (or in a batch) is
 *   refused before it runs; an operation with @defer or @stream asked for by a client that takes no
 *   type carrying parts, or in a batch (one JSON array), runs without them, and is answered whole;
 *   a negative `initialCount` on the @stream left is refused (streamInitialCount);
 * - result: parts go out in multipart/mixed whenever the client takes it (before SSE), in the
 *   2022-08-24 format unless the range says `incrementalSpec=v0.2`: then in graphql-js
 *   17.0.0-alpha.9's (`pending`, `incremental` by id, `completed`), which Apollo Client 4's
 *   `GraphQL17Alpha9Handler` and Apollo Server 5.1 speak.
 */
export function useIncrementalDelivery(options: { readonly schema: GraphQLSchema }): Policy {
  return {
    name: 'incremental delivery',
    document(operation) {
      const { request } = operation;
      if (operation.definition?.operation === 'subscription' || operation.live) return subscriptionRefusal(request);
      if (operation.prepared?.incremental !== true) return undefined;
      // A batch is one JSON array: its operations answer whole too.
      if (request.batched || negotiationOf(request).parts === undefined)
        operation.document = plainDocumentOf(operation);
      return streamInitialCount(operation);
    },
    result(operation) {
      const { result, document } = operation;
      const negotiated = operation.request.negotiated;
      if (
        negotiated?.alpha9 !== true ||
        !isAsyncIterable(result) ||
        document === undefined ||
        !answersInParts(document, operation.params.variables)
      )
        return;
      const rewrite = alpha9Payloads(
        options.schema,
        document,
        operation.params.operationName,
        operation.params.variables,
      );
      operation.result = mapAsyncIterator(result, (part) => rewrite(part as Payload2022) as ExecutionResult);
    },
  };
}
