/**
 * Maps an arbitrary GraphQL list window `[offset, offset + limit)` onto the upstream's
 * `page`/`size` pagination, where call `(page p, size s)` returns offsets `[(p-1)*s, p*s)`.
 *
 * Pure and allocation-light: it runs on every list request.
 */

export interface PageCall {
  readonly page: number;
  readonly size: number;
}

export interface PagePlan {
  readonly calls: readonly PageCall[];
  readonly offset: number;
  readonly limit: number;
}

/** The upstream rejects `size` above this. */
const UPSTREAM_MAX_SIZE = 100;

function assertSafeInt(name: string, value: number): void {
  // Safe integers only: every page boundary computed below must be exact.
  if (!Number.isSafeInteger(value)) {
    throw new RangeError(`${name} must be a safe integer, got ${String(value)}`);
  }
}

/**
 * Picks the page/size calls that cover [offset, offset+limit) with the fewest calls, then the
 * least over-fetch (total of sizes).
 *
 * One call when some size <= maxSize holds the whole window in one page (the smallest such
 * size). Otherwise two calls, the first holding `offset` and the second holding the window's
 * last item, with the smallest total of sizes (ties: the first one found; deterministic).
 */
export function planPageWindow(offset: number, limit: number, maxSize = UPSTREAM_MAX_SIZE): PagePlan {
  assertSafeInt('offset', offset);
  assertSafeInt('limit', limit);
  assertSafeInt('maxSize', maxSize);
  if (maxSize < 1) throw new RangeError(`maxSize must be >= 1, got ${maxSize}`);
  if (offset < 0) throw new RangeError(`offset must be >= 0, got ${offset}`);
  if (limit < 1 || limit > maxSize) {
    throw new RangeError(`limit must be between 1 and ${maxSize}, got ${limit}`);
  }
  // Keeps offset + limit (and so every page end we compute) exact.
  if (offset > Number.MAX_SAFE_INTEGER - limit) {
    throw new RangeError(`offset + limit must be a safe integer, got ${offset} + ${limit}`);
  }

  const size = smallestSingleSize(offset, limit, maxSize);
  if (size !== 0) {
    return { calls: [{ page: (offset - (offset % size)) / size + 1, size }], offset, limit };
  }
  return twoCallPlan(offset, limit, maxSize);
}

/** The smallest size whose page holds the whole window, or 0 if none up to maxSize does. */
function smallestSingleSize(offset: number, limit: number, maxSize: number): number {
  // One page of size s holds the window iff offset's position inside its page leaves room for
  // `limit` items. Sizes below `limit` cannot, so the scan starts at `limit`; the first hit is
  // the smallest size, i.e. the least over-fetch.
  for (let s = limit; s <= maxSize; s++) {
    if ((offset % s) + limit <= s) return s;
  }
  return 0;
}

/** The cheapest pair of calls, for a window that no single page of size <= maxSize holds. */
function twoCallPlan(offset: number, limit: number, maxSize: number): PagePlan {
  // Two calls. No single page fits, so page A (size s1) holds `offset` but not `last`, and
  // page B (size s2) holds `last` but not `offset`; together they cover the window iff B starts
  // no later than A ends (overlap or adjacency).
  const last = offset + limit - 1;

  // Two pages of size `limit` always work: the window then straddles exactly one page
  // boundary (it did not fit in one page above). Starting from this bound prunes hard.
  let bestS1 = limit;
  let bestS2 = limit;
  let bestTotal = 2 * limit;

  // The union of A and B spans at least [offset - offset % s1, offset + limit), so
  // s1 + s2 >= limit + offset % s1; and s1 <= bestTotal - 2 as s2 >= 1 (this stays true as
  // bestTotal shrinks: a new best s1 + s2 exceeds every s1 still to come).
  // s1 runs downwards: large first pages cover most of the window, so a tight bound is found
  // early and prunes the rest (offsets < 100000: at most 830 modulo steps, vs 1973 upwards).
  for (let s1 = Math.min(maxSize, bestTotal - 2); s1 >= 1; s1--) {
    const r1 = offset % s1;
    if (limit + r1 >= bestTotal) continue; // cannot beat the best even with the ideal s2
    // A ends at offset - r1 + s1 (<= last: A does not hold `last`). B starts at last - last % s2
    // and must start no later than A ends: last % s2 >= gap. As last % s2 < s2, s2 > gap.
    const gap = limit - 1 + r1 - s1;
    // Only strictly better totals are worth testing.
    const maxS2 = Math.min(maxSize, bestTotal - s1 - 1);
    for (let s2 = gap + 1; s2 <= maxS2; s2++) {
      if (last % s2 >= gap) {
        // The smallest fitting s2 for this s1: larger ones only add over-fetch.
        bestS1 = s1;
        bestS2 = s2;
        bestTotal = s1 + s2;
        break;
      }
    }
    if (bestTotal === limit) break; // exact tiling: nothing can beat it
  }

  const r1 = offset % bestS1;
  const r2 = last % bestS2;
  return {
    calls: [
      { page: (offset - r1) / bestS1 + 1, size: bestS1 },
      { page: (last - r2) / bestS2 + 1, size: bestS2 },
    ],
    offset,
    limit,
  };
}

/**
 * Given the items each call returned (same order as plan.calls; a page may be short or empty at
 * the end of the collection), returns the items of the window in order, without duplicates where
 * calls overlap.
 *
 * Stops at the first window offset no returned page holds: that is where the collection ends.
 * Pages longer than their call's size are trimmed to it (the extra items are not at the
 * offsets the call asked for).
 */
export function sliceWindow<T>(plan: PagePlan, pages: readonly (readonly T[])[]): T[] {
  const { calls, offset, limit } = plan;
  if (pages.length !== calls.length) {
    throw new RangeError(`expected ${calls.length} pages (one per call), got ${pages.length}`);
  }
  const end = offset + limit;
  const out: T[] = [];
  let pos = offset;
  while (pos < end) {
    // Take `pos` from the page that holds it and reaches furthest: each offset is copied once,
    // whatever the call order or overlap.
    let pick = -1;
    let pickStart = 0;
    let reach = pos;
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!;
      const start = (call.page - 1) * call.size;
      const stop = start + Math.min(pages[i]!.length, call.size);
      if (start <= pos && stop > reach) {
        pick = i;
        pickStart = start;
        reach = stop;
      }
    }
    if (pick < 0) break; // no page has `pos`: the collection ended inside the window
    const items = pages[pick]!;
    const stop = Math.min(reach, end);
    for (; pos < stop; pos++) out.push(items[pos - pickStart] as T);
  }
  return out;
}
