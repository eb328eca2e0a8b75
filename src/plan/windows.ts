import { offsetForArgs } from '@pothos/plugin-relay';
import { carries, Need, type Needs, type Strategy } from '../domain/needs.js';
import { type PageCall, planPageWindow } from '../domain/page-windows.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/pages.js';

/*
 * Which listing reads a connection makes: pure, shared by the plan (counting before execution)
 * and the connection resolvers (reading), so the two cannot disagree.
 */

export interface ConnectionArgs {
  readonly first?: number | null | undefined;
  readonly last?: number | null | undefined;
  readonly after?: string | null | undefined;
  readonly before?: string | null | undefined;
}

/**
 * The window a connection's arguments name: `[offset, offset + size)`, or, for `last` without
 * `before`, the last `last` items, which needs the listing's total first.
 */
export type ConnectionWindow =
  | { readonly fromEnd: false; readonly offset: number; readonly size: number }
  | { readonly fromEnd: true; readonly last: number };

export function connectionWindow(args: ConnectionArgs): ConnectionWindow {
  if (args.last != null && args.before == null) return { fromEnd: true, last: args.last };
  const { offset, expectedSize } = offsetForArgs({ args, defaultSize: DEFAULT_PAGE_SIZE, maxSize: MAX_PAGE_SIZE });
  return { fromEnd: false, offset, size: expectedSize };
}

/** How many items a window holds at most. */
export const windowSize = (window: ConnectionWindow): number => (window.fromEnd ? window.last : window.size);

/** Where a `heads` connection's items come from. */
export type HeadListingSource =
  /** Get Heads pages: variant A, the total in every page. */
  | 'pages'
  /** One Get Heads Ext call: variant B with head_metadata, one row more for `hasNextPage`. */
  | 'ext'
  /** Both at once, joined by id: the items need fields of both variants. */
  | 'both';

export interface HeadFilter {
  readonly search?: string | undefined;
  readonly style?: string | undefined;
}

/**
 * Get Heads Ext answers head_metadata and Hair B for a whole window in one call, where the pages
 * would need one more read per head; it has no style filter (contract 4.9), and the plain
 * strategy never joins listings.
 */
export function headListingSource(items: Needs, filter: HeadFilter, strategy: Strategy): HeadListingSource {
  if (strategy === 'plain' || filter.style !== undefined || (items & (Need.metadata | Need.hairB)) === 0)
    return 'pages';
  return items & Need.variantA ? 'both' : 'ext';
}

/** What a listing source carries of each head it lists. */
export const sourceCarries = (source: HeadListingSource): Needs =>
  source === 'pages'
    ? carries.listHeads
    : source === 'ext'
      ? carries.listHeadsExt
      : carries.listHeads | carries.listHeadsExt;

/** One page call of a paged listing (Get Heads, Get Permissions). */
export const pageCalls = (offset: number, size: number): readonly PageCall[] => planPageWindow(offset, size).calls;

/** Get Heads Ext's parameters for a window: one row more tells whether more follow. */
export const extWindow = (offset: number, size: number) => ({ limit: size + 1, skip: offset });

/** A paged listing's total: one page of one item. */
export const COUNT_CALL: PageCall = { page: 1, size: 1 };
