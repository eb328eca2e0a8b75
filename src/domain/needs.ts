/*
 * What a selection needs of a head, as bits, and which upstream reads carry what (the contract's
 * endpoint table as data). Every read carries the head's common fields (name, url, created_at,
 * the hair's common fields); the bits are what only some reads carry.
 */

/** Needs of a selection, OR-ed together. */
export type Needs = number;

export const Need = {
  none: 0,
  /** The head itself: every read carries it. Implied by any head read. */
  head: 1,
  /** Variant A fields: `updated_at`, `ar_url`, Hair A's own fields (contract 2.1, 2.2). */
  variantA: 2,
  /** Hair B's own fields: `hair_metadata`, `user_id` (contract 2.4). */
  hairB: 4,
  /** `head_metadata`: only the extended reads carry it (contract 4.5, 4.7, 4.9). */
  metadata: 8,
  /** A connection's `totalCount`. */
  total: 16,
} as const;

/** The by-id reads of one head (contract 4.5, 4.7, 4.8). */
export type HeadRead = 'getHeadById' | 'getHeadExtById' | 'getHeadExt';

/** Reads that answer heads, by-id or listed, and what each carries. */
export type HeadSourceRead = HeadRead | 'listHeads' | 'listHeadsExt' | 'updateHead';

export const carries: Readonly<Record<HeadSourceRead, Needs>> = {
  // Head B without head_metadata (an array of one).
  getHeadById: Need.head | Need.hairB,
  // Head B with head_metadata.
  getHeadExtById: Need.head | Need.hairB | Need.metadata,
  // Head A with head_metadata.
  getHeadExt: Need.head | Need.variantA | Need.metadata,
  // Pages of Head A without head_metadata.
  listHeads: Need.head | Need.variantA,
  // Arrays of Head B with head_metadata.
  listHeadsExt: Need.head | Need.hairB | Need.metadata,
  // Update Head answers Head A without head_metadata (contract 4.3).
  updateHead: Need.head | Need.variantA,
};

/** The head needs of a selection: its bits about the head, without a connection's own. */
export const HEAD_NEEDS: Needs = Need.head | Need.variantA | Need.hairB | Need.metadata;

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
const readSets: readonly { reads: readonly HeadRead[]; carried: Needs }[] = Array.from({ length: 1 << byIdReads.length }, (_, mask) =>
  byIdReads.filter((_, i) => mask & (1 << i)),
)
  .sort((a, b) => a.length - b.length || a.reduce((s, r) => s + weight[r], 0) - b.reduce((s, r) => s + weight[r], 0))
  .map((reads) => ({ reads, carried: reads.reduce((bits, read) => bits | carries[read], 0) }));

/** The read that answers one need under the plain strategy. */
const plainRead = (need: Needs): HeadRead => (need === Need.hairB ? 'getHeadExtById' : 'getHeadExt');

/**
 * The by-id reads that complete a head: what `needs` asks minus what the request has read or is
 * reading (`known`, the bits of those reads). One pure function for the plan (counting) and the
 * head loader (reading), so the two cannot disagree.
 */
export function planHeadReads(needs: Needs, known: Needs, strategy: Strategy): readonly HeadRead[] {
  const missing = (needs | Need.head) & HEAD_NEEDS & ~known;
  if (missing === 0) return [];
  if (strategy === 'plain') {
    const reads = new Set<HeadRead>();
    for (const need of [Need.head, Need.variantA, Need.metadata, Need.hairB]) if (missing & need) reads.add(plainRead(need));
    return [...reads];
  }
  return readSets.find((set) => (set.carried & missing) === missing)!.reads;
}
