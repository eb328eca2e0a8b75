import { GraphQLError, Kind, type ValueNode } from 'graphql';
import { z } from 'zod';
import { headIdFrom, nodeIdFrom } from '../domain/ids.js';
import type { GatewayContext } from './context.js';

/** One entry of `extensions.fieldErrors`: which input was wrong, why, and a machine-readable kind. */
export interface FieldError {
  readonly path: readonly (string | number)[];
  readonly message: string;
  readonly type: string;
}

interface Issue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
  readonly code?: unknown;
  readonly params?: { readonly type?: unknown } | undefined;
}

/** The BAD_USER_INPUT error every refused argument or input becomes; nothing is sent upstream. */
export function invalidInput(issues: readonly Issue[]): GraphQLError {
  const fieldErrors: FieldError[] = issues.map((issue) => ({
    path: (issue.path ?? []).map((segment) => {
      const key = typeof segment === 'object' ? segment.key : segment;
      return typeof key === 'number' ? key : String(key);
    }),
    message: issue.message,
    type:
      typeof issue.params?.type === 'string'
        ? issue.params.type
        : typeof issue.code === 'string'
          ? issue.code
          : 'invalid',
  }));
  const summary = fieldErrors.map((e) => (e.path.length ? `${e.path.join('.')}: ${e.message}` : e.message)).join('; ');
  return new GraphQLError(`Invalid input: ${summary}`, { extensions: { code: 'BAD_USER_INPUT', fieldErrors } });
}

const invalidNodeId = {
  code: 'custom',
  message: 'Not a valid global ID or head UUID',
  params: { type: 'invalid_global_id' },
} as const;

/** A node id: garbage is the caller's mistake (BAD_USER_INPUT); another type's ID resolves to null. */
export const nodeIdSchema = z.string().transform((value, ctx) => {
  const id = nodeIdFrom(value);
  if (id === undefined) ctx.addIssue(invalidNodeId);
  return id ?? null;
});

/** The BAD_USER_INPUT of one id of a list that is not an ID; the other ids still resolve. */
export const invalidNodeIdAt = (path: readonly (string | number)[]) =>
  invalidInput([{ ...invalidNodeId, path: [...path] }]);

/** A head's ID as clients may give it: its global ID or its raw UUID. Resolves to the UUID. */
export const headIdSchema = z.string().transform((value, ctx) => {
  const id = headIdFrom(value);
  if (id === undefined)
    ctx.addIssue({
      code: 'custom',
      message: 'Expected a Head global ID or a UUID',
      params: { type: 'invalid_head_id' },
    });
  return id ?? z.NEVER;
});

/** How deep a JSON input (`headMetadata`, labels) may nest, and how large it may be, serialised. */
const MAX_JSON_DEPTH = 32;
export const MAX_JSON_BYTES = 16_384;

const jsonInputError = (message: string) => new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });

/**
 * A JSON input within MAX_JSON_DEPTH and MAX_JSON_BYTES, or a BAD_USER_INPUT GraphQLError thrown
 * (graphql-js reports it as it is, for a variable or a literal). The depth is walked without
 * recursion: 5,000 nested arrays overflowed the stack of every recursive walk after it.
 */
export function boundedJson<T>(value: T): T {
  const pending: [unknown, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [item, depth] = pending.pop()!;
    if (item === null || typeof item !== 'object') continue;
    if (depth >= MAX_JSON_DEPTH) throw jsonInputError(`A JSON value may nest at most ${MAX_JSON_DEPTH} levels deep.`);
    for (const child of Array.isArray(item) ? item : Object.values(item)) pending.push([child, depth + 1]);
  }
  if (Buffer.byteLength(JSON.stringify(value) ?? '') > MAX_JSON_BYTES)
    throw jsonInputError(`A JSON value may take at most ${MAX_JSON_BYTES} bytes.`);
  return value;
}

/** A JSON literal of the document, refused past MAX_JSON_DEPTH before a recursive walk meets it. */
export function literalWithinDepth<T extends ValueNode>(ast: T): T {
  const pending: [ValueNode, number][] = [[ast, 0]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop()!;
    if (node.kind !== Kind.LIST && node.kind !== Kind.OBJECT) continue;
    if (depth >= MAX_JSON_DEPTH) throw jsonInputError(`A JSON value may nest at most ${MAX_JSON_DEPTH} levels deep.`);
    for (const child of node.kind === Kind.LIST ? node.values : node.fields.map((field) => field.value))
      pending.push([child, depth + 1]);
  }
  return ast;
}

/** Whether the request carries an Authorization header to forward. */
export const carriesToken = (context: Pick<GatewayContext, 'authorization'>): boolean =>
  context.authorization !== undefined && context.authorization.trim() !== '';

/** Operations the contract says need a bearer token fail here, before any upstream call. */
export function requireAuthorization(context: GatewayContext): void {
  if (!carriesToken(context)) {
    throw new GraphQLError('This field needs an Authorization header with a bearer token', {
      extensions: { code: 'UNAUTHENTICATED' },
    });
  }
}
