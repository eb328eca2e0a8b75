import { offsetForArgs, offsetToCursor } from '@pothos/plugin-relay';
import type { ListWindow } from '../loaders/request-loaders.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './inputs.js';

export interface ConnectionArgs {
  readonly first?: number | null | undefined;
  readonly last?: number | null | undefined;
  readonly after?: string | null | undefined;
  readonly before?: string | null | undefined;
}

/** Where a connection's items come from. */
export interface WindowSource<T> {
  /** The items at [offset, offset+limit), with the total or whether more follow when known. */
  window(offset: number, limit: number): Promise<ListWindow<T>>;
  /**
   * The listing's total, for `last` without `before` and for `totalCount`. It may answer with a
   * window starting at 0 as well (a probe), which the connection then uses if it covers the page.
   */
  total(): Promise<{ total: number; probe?: { limit: number; items: T[] } }>;
}

/** What a connection field resolves to; `totalCount` is read only when selected. */
export interface WindowConnection<T> {
  readonly edges: { cursor: string; node: T }[];
  readonly pageInfo: { startCursor: string | null; endCursor: string | null; hasPreviousPage: boolean; hasNextPage: boolean };
  readonly totalCount: () => Promise<number>;
}

/**
 * Relay paging over an offset listing: the arguments become one window [offset, offset+limit),
 * loaded through the request's loaders (one upstream call for most windows). `last` without
 * `before` counts back from the end, so the total comes first.
 */
export async function resolveWindowConnection<T>(args: ConnectionArgs, source: WindowSource<T>): Promise<WindowConnection<T>> {
  const counted = args.last != null && args.before == null ? await source.total() : undefined;
  const { offset, expectedSize } = offsetForArgs({ args, defaultSize: DEFAULT_PAGE_SIZE, maxSize: MAX_PAGE_SIZE, totalCount: counted?.total });
  let window: ListWindow<T>;
  const probe = counted?.probe;
  if (probe !== undefined && offset + expectedSize <= probe.limit) {
    window = { items: probe.items.slice(offset, offset + expectedSize), total: counted!.total };
  } else if (expectedSize === 0) {
    window = { items: [], total: counted?.total };
  } else {
    window = await source.window(offset, expectedSize);
  }
  const known = window.total ?? counted?.total;
  const totalCount = known === undefined ? async () => (await source.total()).total : async () => known;
  const edges = window.items.map((node, index) => ({ cursor: offsetToCursor(offset + index), node }));
  const hasNextPage = window.hasMore ?? offset + window.items.length < (known ?? (await totalCount()));
  return {
    edges,
    totalCount,
    pageInfo: {
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
      hasPreviousPage: offset > 0,
      hasNextPage,
    },
  };
}

/**
 * A source over a paged listing (page wrappers carry the total): its total comes from a probe
 * window at the start, which is also the answer whenever the listing fits in it.
 */
export function pagedSource<T>(window: (offset: number, limit: number) => Promise<ListWindow<T>>, last: number | null | undefined): WindowSource<T> {
  return {
    window,
    async total() {
      // `last` is already 1..100 (connectionArgsSchema); for totalCount alone one row is enough.
      const limit = last ?? 1;
      const probe = await window(0, limit);
      return { total: probe.total ?? 0, probe: { limit, items: probe.items } };
    },
  };
}
