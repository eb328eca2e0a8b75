import { BREAK, type DocumentNode, type ExecutionResult, type GraphQLSchema, Kind, visit } from 'graphql';
import { createGraphQLError, isAsyncIterable, mapAsyncIterator } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import Negotiator from 'negotiator';
import { streamInitialCount } from '../documents/incremental-delivery.js';
import { plainDocumentOf } from '../documents/prepared.js';
import { codingsFor } from '../http/codings.js';
import { refusalBody, refusalType } from '../http/refusal.js';
import type { Negotiated, WholeAnswer } from '../incoming.js';
import type { Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import { alpha9Payloads, type Payload2022 } from './alpha9-payloads.js';
import { answerTypeFor } from './media-types.js';

/** Ours, each with the only charset it writes. */
const mediaTypes = [
  'application/json',
  'application/graphql-response+json',
  'multipart/mixed',
  'text/event-stream',
].map((type) => `${type};charset=utf-8`);

const quality = /;\s*q\s*=/i;
/** A parameter but `charset` and `q`: yoga reads none, and negotiator would take it as a condition ours do not meet. */
const ignoredParameter = /;(?!\s*(q|charset)\s*=)[^;,]*/gi;
/** Apollo's name for graphql-js 17.0.0-alpha.9's incremental format (https://specs.apollo.dev/incremental/v0.2/). */
const alpha9Format = /^\s*multipart\/mixed\s*;(?:.*;)?\s*incrementalSpec\s*=\s*"?v0\.2"?\s*(?:;|$)/i;
const apolloSubscriptions = /^\s*multipart\/mixed\s*;(?:.*;)?\s*subscriptionSpec\s*=\s*"?1\.0"?\s*(?:;|$)/i;

/** Our media types in `accept`, most preferred first (negotiator: q-values, the most specific range deciding). */
function negotiate(accept: string): Negotiated {
  const ranges = accept.split(',');
  const types = new Negotiator({ headers: { accept: accept.replace(ignoredParameter, '') } })
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

/** Clients send a handful of distinct Accept headers: each negotiated once (256 kept, of 256 characters at most). */
const known = new LRUCache<string, Negotiated>({ max: 256 });
const KEPT_LENGTH = 256;
const anything = negotiate('*/*');

/** What a request's Accept allows, negotiated when first asked. */
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

const notAcceptableOf = (headers: Record<string, string>, message: string): WholeAnswer => ({
  status: 406,
  headers: { 'content-type': refusalType, ...headers },
  body: refusalBody(message, 'NOT_ACCEPTABLE'),
});

/** The one 406 to a client that takes none of the gateway's media types (answers/answer.ts past the intake too). */
export const notAcceptableAnswer = notAcceptableOf(
  { accept: 'application/graphql-response+json; charset=utf-8, application/json; charset=utf-8' },
  'The Accept header names no media type the gateway answers in: application/graphql-response+json or application/json, and multipart/mixed or text/event-stream for @defer and @stream.',
);

/** For an Accept-Encoding that refuses every coding the gateway writes (http/codings.ts). */
const noCodingAnswer = notAcceptableOf(
  { vary: 'Accept-Encoding' },
  'The Accept-Encoding header refuses every content coding the gateway answers in: accept identity, br, gzip or deflate.',
);

/** A subscription or live query answers in a stream: in a batch, or for a client that takes none, it is refused. */
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
function answersInParts(document: DocumentNode, variables: Readonly<Record<string, unknown>> | null | undefined) {
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

/** 406 at intake, before anything runs (yoga chose after execution, and without q-values: `json;q=0` got JSON). */
export function useContentNegotiation(): Policy {
  return {
    name: 'content negotiation',
    intake(request) {
      if (negotiationOf(request).whole === undefined) return notAcceptableAnswer;
      return codingsFor(request.headers.get('accept-encoding')) === 'none' ? noCodingAnswer : undefined;
    },
  };
}

/** Refuses subscriptions and drops @defer/@stream where no parts are taken; alpha.9's for `incrementalSpec=v0.2`. */
export function useIncrementalDelivery(options: { readonly schema: GraphQLSchema }): Policy {
  return {
    name: 'incremental delivery',
    document(operation) {
      const { request } = operation;
      if (operation.definition?.operation === 'subscription' || operation.live) return subscriptionRefusal(request);
      if (operation.prepared?.incremental !== true) return undefined;
      if (request.batched || negotiationOf(request).parts === undefined)
        operation.document = plainDocumentOf(operation);
      return streamInitialCount(operation);
    },
    result(operation) {
      const { result, document, params } = operation;
      if (operation.request.negotiated?.alpha9 !== true || !isAsyncIterable(result)) return;
      if (document === undefined || !answersInParts(document, params.variables)) return;
      const rewrite = alpha9Payloads(options.schema, document, params.operationName, params.variables);
      operation.result = mapAsyncIterator(result, (part) => rewrite(part as Payload2022) as ExecutionResult);
    },
  };
}
