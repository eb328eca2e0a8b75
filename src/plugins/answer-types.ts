import { BREAK, Kind, visit, type DocumentNode } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import Negotiator from 'negotiator';
import { usesIncrementalDelivery } from './defer-stream.js';
import { refusalBody, refusalType } from './refusal.js';

/** The media types yoga answers in, each with the only charset it writes. */
const answerTypes = ['application/json', 'application/graphql-response+json', 'multipart/mixed', 'text/event-stream'].map((type) => `${type};charset=utf-8`);

/** The types that carry an answer in parts (@defer, @stream). */
const inParts = new Set(['multipart/mixed', 'text/event-stream']);

const quality = /;\s*q\s*=/i;
const keptParameter = /^\s*(q|charset)\s*=/i;

/**
 * The media types of `accept` the gateway can answer in, most preferred first (negotiator: q-values,
 * `q=0` as "not this", the most specific range deciding). Parameters other than `charset` and `q`
 * are dropped first: yoga reads no other (Apollo's `multipart/mixed;deferSpec=20220824`), and
 * negotiator would take each as a condition no type of ours meets.
 */
function acceptableTypes(accept: string): readonly string[] {
  const ranges = accept
    .split(',')
    .map((range) => range.split(';').filter((part, i) => i === 0 || keptParameter.test(part)).join(';'))
    .join(',');
  return new Negotiator({ headers: { accept: ranges } }).mediaTypes(answerTypes).map((type) => type.slice(0, type.indexOf(';')));
}

const noAnswerType =
  'The Accept header names no media type the gateway answers in: application/graphql-response+json or application/json, and multipart/mixed or text/event-stream for @defer and @stream.';
const partsNotAccepted = 'This operation answers in parts (@defer, @stream): ask for it with Accept: multipart/mixed or text/event-stream.';

/** Whether an operation answers in parts: a @defer or @stream its `if` does not turn off. */
function answersInParts(document: DocumentNode, variables: Readonly<Record<string, unknown>> | null | undefined): boolean {
  if (!usesIncrementalDelivery(document)) return false;
  let parts = false;
  visit(document, {
    Directive(node) {
      if (node.name.value !== 'defer' && node.name.value !== 'stream') return undefined;
      const condition = node.arguments?.find((argument) => argument.name.value === 'if')?.value;
      const off = condition?.kind === Kind.BOOLEAN ? !condition.value : condition?.kind === Kind.VARIABLE && variables?.[condition.name.value] === false;
      if (off) return undefined;
      parts = true;
      return BREAK;
    },
  });
  return parts;
}

/**
 * The answer's media type, agreed before anything runs. yoga picks it after execution, by the
 * position of the types in Accept and without reading q-values: an operation a client cannot take
 * the answer of ran in full, upstream calls included, to be answered 406, and
 * `application/json;q=0` was answered in JSON. Here:
 * - an Accept that names no type the gateway answers in is HTTP 406 `NOT_ACCEPTABLE` before the
 *   body is read;
 * - an Accept with q-values reaches yoga as the types it accepts, most preferred first, so yoga's
 *   choice follows them; one without is left as it is (yoga's order is already the client's);
 * - an operation that answers in parts (@defer, @stream) asked for without a type that carries
 *   parts is refused before execution, HTTP 406 `NOT_ACCEPTABLE`. (A later issue may answer it
 *   whole in one JSON document instead: that is this hook.)
 */
export function useAnswerTypes(): Plugin {
  // Clients send a handful of distinct Accept headers: each is negotiated once.
  const known = new LRUCache<string, readonly string[]>({ max: 256 });
  const acceptedBy = new WeakMap<Request, readonly string[]>();
  return {
    onRequestParse({ request, endResponse, fetchAPI }) {
      const accept = request.headers.get('accept');
      // None (or empty, as yoga reads it): anything.
      if (!accept) return;
      let types = known.get(accept);
      if (types === undefined) known.set(accept, (types = acceptableTypes(accept)));
      if (types.length === 0) {
        endResponse(new fetchAPI.Response(refusalBody(noAnswerType, 'NOT_ACCEPTABLE'), { status: 406, headers: { 'content-type': refusalType } }));
        return;
      }
      acceptedBy.set(request, types);
      if (quality.test(accept)) request.headers.set('accept', types.join(', '));
    },
    onExecute({ args, setResultAndStopExecution }) {
      const request = (args.contextValue as { request?: Request }).request;
      const types = request === undefined ? undefined : acceptedBy.get(request);
      if (types === undefined || types.some((type) => inParts.has(type)) || !answersInParts(args.document, args.variableValues)) return;
      setResultAndStopExecution({ errors: [createGraphQLError(partsNotAccepted, { extensions: { code: 'NOT_ACCEPTABLE', http: { status: 406 } } })] });
    },
  };
}
