import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { OperationState } from '../operation-state.js';
import type { OperationStep, Policy } from '../pipeline/stages.js';
import type { HttpRequest, OperationParams } from '../request-state.js';

/** A 400 BAD_REQUEST refusal, with more of the `http` extension if it needs it. */
export const badRequest = (message: string, http: Record<string, unknown> = {}) =>
  createGraphQLError(message, { extensions: { code: 'BAD_REQUEST', http: { status: 400, ...http } } });

const typeName = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

/** `text` parsed, or a refusal naming `what` without a word of the text (JSON.parse's message quotes it). */
function parsed(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw badRequest(`${what} is not valid JSON.`);
  }
}

/** The first media type of a Content-Type (a list is not HTTP, but some clients send one). */
function contentTypeOf(request: HttpRequest): string {
  const header = request.headers.get('content-type');
  if (header === 'application/json') return header; // the usual one, without a copy
  return (header ?? '').split(',')[0]!.split(';')[0]!.trim().toLowerCase();
}

/** A GET's (or a form's) parameters: GraphQL's four and `documentId`; `variables` and `extensions` are JSON. */
function urlParams(search: URLSearchParams): OperationParams {
  const json = (name: 'variables' | 'extensions') => {
    const value = search.get(name);
    return value ? (parsed(value, `The "${name}" URL parameter`) as Record<string, unknown>) : undefined;
  };
  return {
    query: search.get('query') || undefined,
    operationName: search.get('operationName') || undefined,
    variables: json('variables'),
    extensions: json('extensions'),
    documentId: search.get('documentId') || undefined,
  };
}

function jsonParams(body: Buffer): unknown {
  const params = parsed(body.toString('utf8'), 'The request body');
  if (params === null || typeof params !== 'object')
    throw badRequest(`POST body is expected to be object but received ${typeName(params)}`);
  return params;
}

/** A POST's body reader by Content-Type: GraphQL over HTTP's JSON, and the two forms yoga also reads. */
const bodyReaders: Readonly<Record<string, (body: Buffer) => unknown>> = {
  'application/json': jsonParams,
  'application/graphql+json': jsonParams,
  'application/graphql': (body) => ({ query: body.toString('utf8') }),
  'application/x-www-form-urlencoded': (body) => urlParams(new URLSearchParams(body.toString('utf8'))),
};

/** intake/body.ts's reader. */
export type BodyReader = <T>(request: HttpRequest, use: (bytes: Buffer) => T) => Promise<T | GraphQLError>;

/** A request's operations from URL or body (another Content-Type, even multipart, is 415: the schema takes no file). */
export function useRequestParams(read: BodyReader): Policy {
  const operations = (request: HttpRequest, params: unknown) => {
    request.batched = Array.isArray(params);
    for (const entry of request.batched ? (params as unknown[]) : [params]) {
      const paramsType = typeName(entry);
      // What is not an object (a batch's null, a number) has no parameters: checkParams refuses it by what was sent.
      new OperationState(paramsType === 'object' ? (entry as OperationParams) : {}, request, paramsType);
    }
    return undefined;
  };
  return {
    name: 'params',
    intake(request) {
      const { method, target } = request.http;
      if (method === 'GET') {
        const query = target.indexOf('?');
        return operations(request, urlParams(new URLSearchParams(query < 0 ? '' : target.slice(query + 1))));
      }
      const reader = bodyReaders[contentTypeOf(request)];
      if (reader === undefined) return { status: 415, headers: {}, body: null };
      return read(request, (body) => operations(request, reader(body)));
    },
  };
}

const expected = new Set(['query', 'variables', 'operationName', 'extensions', 'documentId']);
const allow = { headers: { Allow: 'GET, POST' } };

/** Refuses (400) parameters GraphQL over HTTP does not allow, once persisted documents named the query (yoga's). */
export const checkParams: OperationStep = (operation) => {
  if (operation.paramsType !== 'object')
    return badRequest(`Expected params to be an object but given ${operation.paramsType}.`, allow);
  const params = operation.params as Record<string, unknown>;
  for (const name in params)
    if (params[name] != null && !expected.has(name))
      return badRequest(
        'The request body has a parameter the gateway does not take (it takes query, operationName, variables, extensions and documentId).',
      );
  const { query } = operation.params;
  if (query == null) return badRequest('Must provide query string.', { spec: true, ...allow });
  if (typeof query !== 'string')
    return badRequest(`Expected "query" param to be a string, but given ${typeName(query)}.`, allow);
  for (const name of ['variables', 'extensions'] as const) {
    const type = typeName(params[name] ?? {});
    if (type !== 'object')
      return badRequest(`Expected "${name}" param to be empty or an object, but given ${type}.`, allow);
  }
  return undefined;
};

export const paramsCheck: Policy = { name: 'params check', document: checkParams };

/** Read level by level: a body within MAX_BODY_BYTES may nest 50,000 deep, overflowing recursive readers (coercion). */
function nestedDeeperThan(value: unknown, max: number): boolean {
  let level: object[] = value !== null && typeof value === 'object' ? [value] : [];
  for (let depth = 1; level.length > 0; depth++) {
    if (depth > max) return true;
    const next: object[] = [];
    for (const container of level)
      for (const item of Array.isArray(container) ? container : Object.values(container))
        if (item !== null && typeof item === 'object') next.push(item as object);
    level = next;
  }
  return false;
}

/** Refuses variables deeper than MAX_VARIABLES_DEPTH (400, `limit: "variables_depth"`): first of the document stage. */
export function variablesDepth(options: {
  readonly maxVariablesDepth: number;
  readonly onRefused?: () => void;
}): Policy {
  const { maxVariablesDepth: max } = options;
  return {
    name: 'variables depth',
    document(operation) {
      if (!nestedDeeperThan(operation.params.variables, max)) return undefined;
      options.onRefused?.();
      return createGraphQLError(`The request's variables are nested more than ${max} levels deep.`, {
        extensions: { code: 'BAD_REQUEST', limit: 'variables_depth', maxVariablesDepth: max, http: { status: 400 } },
      });
    },
  };
}
