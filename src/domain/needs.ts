/*
 * What a selection needs of a head, as bits, and which upstream reads carry what (the contract's
 * endpoint table as data). Every read carries the head's common fields (name, url, created_at,
 * the hair's common fields); the bits are what only some reads carry.
 */

/**
 * The parts of a head that only some reads carry, in one list: the need bits, the reads' sets and
 * the loaders' records all derive from it. `head` is what every read carries (name, url,
 * created_at, the hair's common fields).
 */
export const headParts = ['head', 'variantA', 'hairB', 'metadata'] as const;
/**
 * - `head`: the head itself, implied by any head read;
 * - `variantA`: `updated_at`, `ar_url`, Hair A's own fields (contract 2.1, 2.2);
 * - `hairB`: Hair B's own fields, `hair_metadata` and `user_id` (contract 2.4);
 * - `metadata`: `head_metadata`, which only the extended reads carry (contract 4.5, 4.7, 4.9).
 */
export type HeadPart = (typeof headParts)[number];

/** Needs of a selection, OR-ed together: a bit per head part, and one for a connection's `totalCount`. */
export type Needs = number;

const bitOf = (part: HeadPart): Needs => 1 << headParts.indexOf(part);

/** The bits of a set of parts. */
export const needsOf = (parts: readonly HeadPart[]): Needs => parts.reduce((bits, part) => bits | bitOf(part), 0);

export const Need: Readonly<Record<HeadPart, Needs> & { none: Needs; total: Needs }> = Object.freeze({
  none: 0,
  ...(Object.fromEntries(headParts.map((part) => [part, bitOf(part)])) as Record<HeadPart, Needs>),
  /** A connection's `totalCount`. */
  total: 1 << headParts.length,
});

/** The parts a set of needs names, in `headParts` order. */
const partsOf = (needs: Needs): HeadPart[] => headParts.filter((part) => needs & bitOf(part));

/** The by-id reads of one head (contract 4.5, 4.7, 4.8). */
export type HeadRead = 'getHeadById' | 'getHeadExtById' | 'getHeadExt';

/** Reads that answer heads, by-id or listed, and what each carries. */
export type HeadSourceRead = HeadRead | 'listHeads' | 'listHeadsExt' | 'updateHead';

/** What each read carries of a head (the contract's endpoint table). */
const carriedParts: Readonly<Record<HeadSourceRead, readonly HeadPart[]>> = {
  // Head B without head_metadata (an array of one).
  getHeadById: ['head', 'hairB'],
  // Head B with head_metadata.
  getHeadExtById: ['head', 'hairB', 'metadata'],
  // Head A with head_metadata.
  getHeadExt: ['head', 'variantA', 'metadata'],
  // Pages of Head A without head_metadata.
  listHeads: ['head', 'variantA'],
  // Arrays of Head B with head_metadata.
  listHeadsExt: ['head', 'hairB', 'metadata'],
  // Update Head answers Head A without head_metadata (contract 4.3).
  updateHead: ['head', 'variantA'],
};

/** The same, as bits. */
export const carries: Readonly<Record<HeadSourceRead, Needs>> = Object.fromEntries(
  Object.entries(carriedParts).map(([read, parts]) => [read, needsOf(parts)]),
) as Record<HeadSourceRead, Needs>;

/** The head needs of a selection: its bits about the head, without a connection's own. */
export const HEAD_NEEDS: Needs = needsOf(headParts);

/**
 * How reads are chosen. `selection` (PLANNER=on): the fewest reads that cover what the operation
 * selects. `plain` (PLANNER=off): every need has its one read, whatever else is selected —
 * for an upstream whose listings cannot be joined with the by-id reads.
 */
export type Strategy = 'selection' | 'plain';

const byIdReads: readonly HeadRead[] = ['getHeadById', 'getHeadExtById', 'getHeadExt'];
/** Relative size of each read's answer, to break ties between equally many calls. */
const weight: Readonly<Record<HeadRead, number>> = { getHeadById: 1, getHeadExtById: 2, getHeadExt: 3 };

/** Every set of by-id reads, cheapest first: fewest calls, then the smallest answers. */
const readSets: readonly { reads: readonly HeadRead[]; carried: Needs }[] = Array.from(
  { length: 1 << byIdReads.length },
  (_, mask) => byIdReads.filter((_, i) => mask & (1 << i)),
)
  .sort((a, b) => a.length - b.length || a.reduce((s, r) => s + weight[r], 0) - b.reduce((s, r) => s + weight[r], 0))
  .map((reads) => ({ reads, carried: reads.reduce((bits, read) => bits | carries[read], 0) }));

/** The read that answers each part under the plain strategy. */
const plainReads: Readonly<Record<HeadPart, HeadRead>> = {
  head: 'getHeadExt',
  variantA: 'getHeadExt',
  hairB: 'getHeadExtById',
  metadata: 'getHeadExt',
};

/** One by-id read of a head, and the parts it was chosen to bring. */
export interface ChosenRead {
  readonly read: HeadRead;
  readonly brings: Needs;
}

/**
 * The by-id reads that complete a head, each with what it brings: what `needs` asks minus what the
 * request has read or is reading (`known`, the bits of those reads). One pure function for the
 * plan, which decides and counts the reads, and the loaders, which carry out what it decided.
 */
export function chooseHeadReads(needs: Needs, known: Needs, strategy: Strategy): readonly ChosenRead[] {
  const missing = (needs | Need.head) & HEAD_NEEDS & ~known;
  if (missing === 0) return [];
  if (strategy === 'plain') {
    const byRead = new Map<HeadRead, Needs>();
    for (const part of partsOf(missing)) byRead.set(plainReads[part], (byRead.get(plainReads[part]) ?? 0) | Need[part]);
    return [...byRead].map(([read, brings]) => ({ read, brings }));
  }
  const { reads } = readSets.find((set) => (set.carried & missing) === missing)!;
  return reads.map((read) => ({ read, brings: carries[read] & missing }));
}
