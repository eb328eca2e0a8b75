import { decodeBase64 } from '@pothos/core';
import { offsetToCursor } from '@pothos/plugin-relay';
import { GraphQLError, Kind, type ValueNode } from 'graphql';
import { z } from 'zod';
import type { GatewayContext } from '../context.js';

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
    type: typeof issue.params?.type === 'string' ? issue.params.type : typeof issue.code === 'string' ? issue.code : 'invalid',
  }));
  const summary = fieldErrors.map((e) => (e.path.length ? `${e.path.join('.')}: ${e.message}` : e.message)).join('; ');
  return new GraphQLError(`Invalid input: ${summary}`, { extensions: { code: 'BAD_USER_INPUT', fieldErrors } });
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const globalIdPattern = /^([A-Za-z_]\w*):(.+)$/s;

function decodeGlobalId(globalId: string): { typename: string; id: string } | undefined {
  if (globalId.length > 200) return undefined;
  let text: string;
  try {
    text = decodeBase64(globalId);
  } catch {
    return undefined;
  }
  const match = globalIdPattern.exec(text);
  return match ? { typename: match[1]!, id: match[2]! } : undefined;
}

/** The head UUID a head id names (its global ID or its raw UUID), or undefined. */
export function headIdFrom(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  if (uuidPattern.test(value)) return value.toLowerCase();
  const decoded = decodeGlobalId(value);
  return decoded?.typename === 'Head' && uuidPattern.test(decoded.id) ? decoded.id.toLowerCase() : undefined;
}

/**
 * What a node id names: a head's UUID (from its global ID, or a raw UUID as `head(id:)` takes),
 * null for a well-formed global ID of a type this gateway has no node for (it matches nothing),
 * undefined when it is not an ID at all.
 */
export function nodeIdFrom(value: unknown): string | null | undefined {
  const head = headIdFrom(value);
  if (head !== undefined) return head;
  if (typeof value !== 'string') return undefined;
  const decoded = decodeGlobalId(value);
  return decoded !== undefined && decoded.typename !== 'Head' ? null : undefined;
}

/** The head a node id names, for the plan; nothing for any other ID. */
export const nodeHeadIdFrom = (value: unknown): string | undefined => nodeIdFrom(value) ?? undefined;

const invalidNodeId = { code: 'custom', message: 'Not a valid global ID or head UUID', params: { type: 'invalid_global_id' } } as const;

/** A node id: garbage is the caller's mistake (BAD_USER_INPUT); another type's ID resolves to null. */
export const nodeIdSchema = z.string().transform((value, ctx) => {
  const id = nodeIdFrom(value);
  if (id === undefined) ctx.addIssue(invalidNodeId);
  return id ?? null;
});

/** The BAD_USER_INPUT of one id of a list that is not an ID; the other ids still resolve. */
export const invalidNodeIdAt = (path: readonly (string | number)[]) => invalidInput([{ ...invalidNodeId, path: [...path] }]);

/** A head's ID as clients may give it: its global ID or its raw UUID. Resolves to the UUID. */
export const headIdSchema = z.string().transform((value, ctx) => {
  const id = headIdFrom(value);
  if (id === undefined) ctx.addIssue({ code: 'custom', message: 'Expected a Head global ID or a UUID', params: { type: 'invalid_head_id' } });
  return id ?? z.NEVER;
});

/** At most this many IDs per `nodes`; each distinct head costs its reads against the call budget. */
export const MAX_NODE_IDS = 100;

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 50;

const pageSize = z
  .number()
  .int()
  .min(1, { error: `must be between 1 and ${MAX_PAGE_SIZE}` })
  .max(MAX_PAGE_SIZE, { error: `must be between 1 and ${MAX_PAGE_SIZE}` })
  .nullish();

/** The largest offset a cursor may name: a forged 2^53-1 or 1e14 must not reach the upstream as a page number. */
const MAX_CURSOR_OFFSET = 2 ** 31 - 1;

/** What the cursors this gateway issues say (Pothos's offset cursors): `<prefix><n>`. */
const cursorPrefix = decodeBase64(offsetToCursor(0)).slice(0, -1);

/** Only cursors as this gateway issues them: n an integer from 0 to 2^31-1 written plainly. */
const cursor = z
  .string()
  .max(64, { error: 'Not a cursor of this connection' })
  .refine(
    (value) => {
      let text: string;
      try {
        text = decodeBase64(value);
      } catch {
        return false;
      }
      const digits = text.startsWith(cursorPrefix) ? text.slice(cursorPrefix.length) : '';
      return /^(0|[1-9]\d{0,9})$/.test(digits) && Number(digits) <= MAX_CURSOR_OFFSET;
    },
    { error: 'Not a cursor of this connection', params: { type: 'invalid_cursor' } },
  )
  .nullish();

/** `first`/`last` 1..100 and cursors this gateway issued; other arguments pass through. */
export const connectionArgsSchema = z
  .looseObject({ first: pageSize, last: pageSize, after: cursor, before: cursor })
  .refine((args) => args.first == null || args.last == null, {
    error: 'Give `first` or `last`, not both',
    path: ['last'],
    params: { type: 'first_and_last' },
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
  if (Buffer.byteLength(JSON.stringify(value) ?? '') > MAX_JSON_BYTES) throw jsonInputError(`A JSON value may take at most ${MAX_JSON_BYTES} bytes.`);
  return value;
}

/** A JSON literal of the document, refused past MAX_JSON_DEPTH before a recursive walk meets it. */
export function literalWithinDepth<T extends ValueNode>(ast: T): T {
  const pending: [ValueNode, number][] = [[ast, 0]];
  while (pending.length > 0) {
    const [node, depth] = pending.pop()!;
    if (node.kind !== Kind.LIST && node.kind !== Kind.OBJECT) continue;
    if (depth >= MAX_JSON_DEPTH) throw jsonInputError(`A JSON value may nest at most ${MAX_JSON_DEPTH} levels deep.`);
    for (const child of node.kind === Kind.LIST ? node.values : node.fields.map((field) => field.value)) pending.push([child, depth + 1]);
  }
  return ast;
}

/** Whether the request carries an Authorization header to forward. */
export const carriesToken = (context: Pick<GatewayContext, 'authorization'>): boolean => context.authorization !== undefined && context.authorization.trim() !== '';

/** Operations the contract says need a bearer token fail here, before any upstream call. */
export function requireAuthorization(context: GatewayContext): void {
  if (!carriesToken(context)) {
    throw new GraphQLError('This field needs an Authorization header with a bearer token', { extensions: { code: 'UNAUTHENTICATED' } });
  }
}
