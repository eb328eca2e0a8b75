import { HEAD_NEEDS, Need, type Needs, type Strategy } from '../domain/needs.js';
import { carriedBy, type HeadReads, headReads, NO_READS, type ReadList } from './reads.js';
import {
  COUNT_CALL,
  type ConnectionWindow,
  extWindow,
  type HeadFilter,
  type HeadListingSource,
  headListingSource,
  pageCalls,
  sourceCarries,
  windowSize,
} from './windows.js';

/*
 * The reads of the listings (the `heads` and `permissions` connections): which listing answers a
 * window's items, the pages that cover it, and what the listed heads need beyond it.
 */

/** What the plan says about one `heads` connection field, for its resolver. */
export interface HeadListingPlan {
  readonly kind: 'headListing';
  /** What the listed heads' fields need for the initial payload. */
  readonly items: Needs;
  readonly source: HeadListingSource;
  /** The reads each listed head needs beyond what its listing carried (a filtered page's head_metadata, say). */
  readonly completion: HeadReads;
  /**
   * What their deferred fields need beyond that, and where it comes from: the window of Get Heads Ext beside the page,
   * or these reads per head.
   */
  readonly deferred: Needs;
  readonly deferredSource: 'ext' | HeadReads;
}

/** One window of the `heads` listing, and what its fields need of it, now and deferred. */
export interface HeadListing {
  readonly filter: HeadFilter;
  readonly window: ConnectionWindow;
  needs: Needs;
  deferred: Needs;
}

export function planHeadListing(
  { filter, window, needs, deferred }: HeadListing,
  strategy: Strategy,
  reads: ReadList,
  responseKey: string,
): HeadListingPlan {
  const items = needs & HEAD_NEEDS & ~Need.head;
  const source = headListingSource(items, filter, strategy);
  if (source === 'pages') {
    planPagedListing('listHeads', filter, window, needs, reads);
  } else if (window.fromEnd) {
    // The total first (one page of one), then the window it places, from both listings if both.
    reads.add('listHeads', { ...filter, ...COUNT_CALL });
    if (source === 'both') estimatePages('listHeads', filter, reads);
    reads.estimate('listHeadsExt', { limit: window.last + 1, skip: 'total - last', search: filter.search });
  } else {
    if (window.size > 0) {
      if (source === 'both')
        for (const call of pageCalls(window.offset, window.size)) reads.add('listHeads', { ...filter, ...call });
      reads.add('listHeadsExt', { ...extWindow(window.offset, window.size), search: filter.search });
    }
    // Get Heads Ext carries no total: one page of one tells it, when it is selected.
    if (needs & Need.total && (source === 'ext' || window.size === 0))
      reads.add('listHeads', { ...filter, ...COUNT_CALL });
  }

  // Heads a filtered page lists may still need a read each: as many as the page has, at most.
  const completion = headReads(items, sourceCarries(source), strategy);
  const size = windowSize(window);
  for (let item = 0; item < size; item++)
    for (const { read } of completion.reads) reads.estimate(read, { id: `${responseKey}[${item}]` });

  // Deferred fields of the listed heads: read beside the page, never in its way. Get Heads Ext
  // answers the window's head_metadata and Hair B in one call; anything else is a read per head.
  const carried = carriedBy(completion.reads) | sourceCarries(source);
  const later = deferred & HEAD_NEEDS & ~carried;
  const besideInOne =
    strategy === 'selection' &&
    filter.style === undefined &&
    !window.fromEnd &&
    (later & ~(Need.metadata | Need.hairB)) === 0;
  if (later !== 0 && besideInOne) {
    if (window.size > 0) reads.add('listHeadsExt', { ...extWindow(window.offset, window.size), search: filter.search });
    return { kind: 'headListing', items, source, completion, deferred: later, deferredSource: 'ext' };
  }
  const perHead = later === 0 ? NO_READS : headReads(later, carried, strategy);
  for (let item = 0; item < size; item++)
    for (const { read } of perHead.reads) reads.estimate(read, { id: `${responseKey}[${item}]` });
  return { kind: 'headListing', items, source, completion, deferred: later, deferredSource: perHead };
}

/** At most two pages hold a window counted from the end, wherever the total puts it. */
function estimatePages(operation: 'listHeads' | 'getPermissions', filter: HeadFilter, reads: ReadList): void {
  reads.estimate(operation, { ...filter, window: 'total - last' });
  reads.estimate(operation, { ...filter, window: 'total - last' });
}

/**
 * Reads of a paged listing (Get Heads, Get Permissions): the pages that cover the window, whose
 * wrappers carry the total. `last` without `before` reads the first `last` items first (their
 * page tells the total, and is the window when the listing is that short), then the window.
 */
export function planPagedListing(
  operation: 'listHeads' | 'getPermissions',
  filter: HeadFilter,
  window: ConnectionWindow,
  needs: Needs,
  reads: ReadList,
): void {
  if (window.fromEnd) {
    for (const call of pageCalls(0, window.last)) reads.add(operation, { ...filter, ...call });
    estimatePages(operation, filter, reads);
  } else if (window.size > 0) {
    for (const call of pageCalls(window.offset, window.size)) reads.add(operation, { ...filter, ...call });
  } else if (needs & Need.total) {
    reads.add(operation, { ...filter, ...COUNT_CALL });
  }
}
