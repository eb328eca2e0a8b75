import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import { OperationState } from '../operation-state.js';
import type { OperationStep, Policy } from '../pipeline/stages.js';
import type { HttpRequest, OperationParams } from '../request-state.js';

const badRequest = (message: string, http: Record<string, unknown> = {}) =>
  createGraphQLError(message, { extensions: { code: 'BAD_REQUEST', http: { status: 400, ...http } } });

/** The JSON type of a value as the refusals name it. */
const typeName = (value: unknown): string => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

const notJson = (what: string) => badRequest(`${what} is not valid JSON.`);

/** The first media type of a Content-Type header (a list is not HTTP, but some clients send one). */
function contentTypeOf(request: HttpRequest): string {
  const header = request.headers.get('content-type');
  // The usual one, read without a copy.
  if (header === 'application/json') return header;
  return (header ?? '').split(',')[0]!.split(';')[0]!.trim().toLowerCase();
}

/** Parameters a GET carries in its URL: GraphQL's four and `documentId`; `variables` and `extensions` are JSON. */
function urlParams(search: URLSearchParams): OperationParams {
  const json = (name: 'variables' | 'extensions') => {
    const value = search.get(name);
    if (!value) return undefined;
    try {
      return JSON.parse(value) as Record<string, unknown>;
    } catch {
      throw notJson(`The "${name}" URL parameter`);
    }
  };
  return {
    query: search.get('query') || undefined,
    operationName: search.get('operationName') || undefined,
    variables: json('variables'),
    extensions: json('extensions'),
    documentId: search.get('documentId') || undefined,
  };
}

/** A JSON body's parameters: an object (one operation), or an array of them (a batch). */
function jsonParams(body: Buffer): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw notJson('The request body');
  }
  if (parsed === null || typeof parsed !== 'object')
    throw badRequest(`POST body is expected to be object but received ${parsed === null ? 'null' : typeof parsed}`);
  return parsed;
}

/** How a POST's body is read, by its Content-Type (GraphQL over HTTP's JSON, and the two forms yoga also reads). */
const bodyReaders: Readonly<Record<string, (body: Buffer) => unknown>> = {
  'application/json': jsonParams,
  'application/graphql+json': jsonParams,
  'application/graphql': (body) => ({ query: body.toString('utf8') }),
  'application/x-www-form-urlencoded': (body) => urlParams(new URLSearchParams(body.toString('utf8'))),
};

/** What reads a request's body (intake/body.ts) and hands its bytes to `use`. */
export type BodyReader = <T>(request: HttpRequest, use: (bytes: Buffer) => T) => Promise<T | GraphQLError>;

/**
 * The intake step that reads a request's GraphQL parameters and makes its operations: a GET's
 * from its URL, a POST's from its body by its Content-Type (JSON, `application/graphql`, a form;
 * anything else, multipart/form-data included (the schema takes no file), is HTTP 415 with no
 * body read). A JSON array is a batch (`request.batched`), one operation per entry. Malformed
 * parameters are the client's mistake, HTTP 400 BAD_REQUEST, without a word of what was sent
 * (JSON.parse's message quotes the text). After the method's check: only GET and POST get here.
 */
export function useRequestParams(read: BodyReader): Policy {
  const operations = (request: HttpRequest, params: unknown) => {
    request.batched = Array.isArray(params);
    for (const entry of request.batched ? (params as unknown[]) : [params]) {
      const paramsType = typeName(entry);
      // What is not an object (a batch's null, a number) has no parameters: checkParams refuses it by what was sent.
      if (paramsType === 'object') new OperationState(entry as OperationParams, request);
      else new OperationState({}, request, paramsType);
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

/**
 * A step of an operation's document stage, after the persisted documents named its query:
 * parameters GraphQL over HTTP does not allow are refused (HTTP 400, BAD_REQUEST): not an object,
 * an unknown parameter (named by no value), no query, a query that is not a string, variables or
 * extensions that are not objects. (yoga's checks, with its words.)
 */
export const checkParams: OperationStep = (operation) => {
  if (operation.paramsType !== 'object')
    return badRequest(`Expected params to be an object but given ${operation.paramsType}.`, allow);
  const params = operation.params as Record<string, unknown>;
  for (const name in params) {
    if (params[name] != null && !expected.has(name))
      return badRequest(
        'The request body has a parameter the gateway does not take (it takes query, operationName, variables, extensions and documentId).',
      );
  }
  const { query, variables, extensions } = operation.params;
  if (query == null) return badRequest('Must provide query string.', { spec: true, ...allow });
  if (typeof query !== 'string')
    return badRequest(`Expected "query" param to be a string, but given ${typeName(query)}.`, allow);
  if (variables != null && typeName(variables) !== 'object')
    return badRequest(`Expected "variables" param to be empty or an object, but given ${typeName(variables)}.`, allow);
  if (extensions != null && typeName(extensions) !== 'object')
    return badRequest(
      `Expected "extensions" param to be empty or an object, but given ${typeName(extensions)}.`,
      allow,
    );
  return undefined;
};

/** The parameters' shape, checked once the persisted documents named the query (`checkParams`). */
export const paramsCheck: Policy = { name: 'params check', document: checkParams };

/**
 * Whether a JSON value nests objects and lists more than `max` deep (`{"a":1}` is one deep), read
 * level by level with no recursion: a body within MAX_BODY_BYTES may nest some 50,000 levels,
 * which every recursive reader of variables (coercion, the response cache's key) would overflow on.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
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

export interface VariablesDepthOptions {
  /** MAX_VARIABLES_DEPTH */
  readonly maxVariablesDepth: number;
  /** Told of every operation refused for its variables' depth, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * Variables nested deeper than MAX_VARIABLES_DEPTH are refused (HTTP 400, BAD_REQUEST, `limit:
 * "variables_depth"`) before any other step reads them: the first of the document stage.
 */
export function variablesDepth(options: VariablesDepthOptions): Policy {
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
