import { decodeBase64 } from '@pothos/core';

/*
 * The ids clients give: a head's UUID, or a relay global ID (base64 of `Type:id`, Pothos's
 * encoding). Pure: what the plan reads ahead and what the schema's inputs check agree.
 */

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

/** At most this many IDs per `nodes`; each distinct head costs its reads against the call budget. */
export const MAX_NODE_IDS = 100;

/**
 * The UUIDs a supergraph's representations of an entity name (`_entities(representations:)`: each `{ __typename,
 * <key>: <UUID> }`), normalised and in order; or the index of the first that is not one of `typename` with a UUID at
 * `key`.
 */
export function entityIdsFrom(representations: unknown, typename: string, key: string): string[] | { index: number } {
  if (!Array.isArray(representations)) return { index: 0 };
  const ids: string[] = [];
  for (const [index, representation] of representations.entries()) {
    const { __typename, [key]: id } = (representation ?? {}) as Record<string, unknown>;
    if (__typename !== typename || typeof id !== 'string' || !uuidPattern.test(id)) return { index };
    ids.push(id.toLowerCase());
  }
  return ids;
}
