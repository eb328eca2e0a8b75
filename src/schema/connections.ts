import { offsetToCursor } from '@pothos/plugin-relay';
import type { ListWindow } from '../loaders/request-loaders.js';
import { type ConnectionArgs, connectionWindow } from '../plan/windows.js';

/** Where a connection's items come from: the reads `plan/windows.ts` counts, and no others. */
export interface ListingReader<T> {
  /** The items at [offset, offset+size), with the total or whether more follow. */
  window(offset: number, size: number): Promise<ListWindow<T>>;
  /** The listing's total: one page of one item. */
  total(): Promise<number>;
  /**
   * A paged listing's first `size` items: their page carries the total, which places a window
   * counted from the end, and is that window when the listing is that short.
   */
  readonly first?: (size: number) => Promise<ListWindow<T>>;
}

/** An item and its place in the listing; its cursor is made only if a client selects it. */
class OffsetEdge<T> {
  constructor(
    readonly node: T,
    readonly offset: number,
  ) {}

  get cursor(): string {
    return offsetToCursor(this.offset);
  }
}

/**
 * Where a window of `count` items from `offset` sits in the listing; cursors made only when selected, as the edges'.
 */
class WindowPageInfo {
  constructor(
    private readonly offset: number,
    private readonly count: number,
    readonly hasNextPage: boolean,
  ) {}

  get hasPreviousPage(): boolean {
    return this.offset > 0;
  }

  get startCursor(): string | null {
    return this.count === 0 ? null : offsetToCursor(this.offset);
  }

  get endCursor(): string | null {
    return this.count === 0 ? null : offsetToCursor(this.offset + this.count - 1);
  }
}

/** What a connection field resolves to; `totalCount` is read only when selected. */
export interface WindowConnection<T> {
  /** Where the window starts in the listing. */
  readonly offset: number;
  readonly edges: OffsetEdge<T>[];
  readonly pageInfo: WindowPageInfo;
  readonly totalCount: () => number | Promise<number>;
}

/**
 * Relay paging over an offset listing: the arguments name one window [offset, offset+size),
 * read through the request's loaders (one upstream call for most windows). `last` without
 * `before` counts back from the end, so the total comes first.
 */
export async function resolveWindowConnection<T>(
  args: ConnectionArgs,
  reader: ListingReader<T>,
): Promise<WindowConnection<T>> {
  const named = connectionWindow(args);
  let offset: number;
  let page: ListWindow<T>;
  if (named.fromEnd) {
    const probe = reader.first ? await reader.first(named.last) : undefined;
    const total = probe?.total ?? (await reader.total());
    offset = Math.max(0, total - named.last);
    const size = total - offset;
    if (probe !== undefined && total <= named.last) page = { items: probe.items.slice(0, size), total };
    else page = size === 0 ? { items: [], total } : { ...(await reader.window(offset, size)), total };
  } else {
    offset = named.offset;
    page = named.size === 0 ? { items: [] } : await reader.window(offset, named.size);
  }
  const { items, total, hasMore } = page;
  const edges = items.map((node, index) => new OffsetEdge(node, offset + index));
  // An empty window between cursors: the `before` cursor's own item follows it.
  const hasNextPage = hasMore ?? (total !== undefined ? offset + items.length < total : args.before != null);
  return {
    offset,
    edges,
    totalCount: total === undefined ? () => reader.total() : () => total,
    pageInfo: new WindowPageInfo(offset, edges.length, hasNextPage),
  };
}
