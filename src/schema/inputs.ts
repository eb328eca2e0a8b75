import { decodeBase64 } from '@pothos/core';
import { cursorToOffset } from '@pothos/plugin-relay';
import { GraphQLError } from 'graphql';
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

const cursor = z
  .string()
  .refine(
    (value) => {
      try {
        const offset = cursorToOffset(value);
        return Number.isSafeInteger(offset) && offset >= 0;
      } catch {
        return false;
      }
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

/** Whether the request carries an Authorization header to forward. */
export const carriesToken = (context: Pick<GatewayContext, 'authorization'>): boolean => context.authorization !== undefined && context.authorization.trim() !== '';

/** Operations the contract says need a bearer token fail here, before any upstream call. */
export function requireAuthorization(context: GatewayContext): void {
  if (!carriesToken(context)) {
    throw new GraphQLError('This field needs an Authorization header with a bearer token', { extensions: { code: 'UNAUTHENTICATED' } });
  }
}
