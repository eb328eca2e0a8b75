import { offsetForArgs, offsetToCursor } from '@pothos/plugin-relay';
import type { ListWindow } from '../loaders/request-loaders.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './inputs.js';

export interface ConnectionArgs {
  readonly first?: number | null | undefined;
  readonly last?: number | null | undefined;
  readonly after?: string | null | undefined;
  readonly before?: string | null | undefined;
}

/** What a connection field resolves to; `totalCount` comes free with every listing page. */
export interface WindowConnection<T> {
  readonly edges: { cursor: string; node: T }[];
  readonly pageInfo: { startCursor: string | null; endCursor: string | null; hasPreviousPage: boolean; hasNextPage: boolean };
  readonly totalCount: number;
}

/**
 * Relay paging over an offset listing: the arguments become one window [offset, offset+limit),
 * loaded through the request's page loaders (one upstream call for most windows).
 * `last` without `before` counts back from the end, so the total is needed first: a probe
 * window from the start gives it, and is the answer too whenever the listing fits in it.
 */
export async function resolveWindowConnection<T>(
  args: ConnectionArgs,
  loadWindow: (offset: number, limit: number) => Promise<ListWindow<T>>,
): Promise<WindowConnection<T>> {
  let probe: ListWindow<T> | undefined;
  let probeSize = 0;
  if (args.last != null && args.before == null) {
    probeSize = Math.min(args.last, MAX_PAGE_SIZE);
    probe = await loadWindow(0, probeSize);
  }
  const { offset, expectedSize } = offsetForArgs({ args, defaultSize: DEFAULT_PAGE_SIZE, maxSize: MAX_PAGE_SIZE, totalCount: probe?.total });
  let window: ListWindow<T>;
  if (probe !== undefined && offset + expectedSize <= probeSize) {
    window = { items: probe.items.slice(offset, offset + expectedSize), total: probe.total };
  } else {
    // A zero-size window still needs the total (totalCount, hasNextPage): one row answers it.
    const loaded = await loadWindow(offset, Math.max(expectedSize, 1));
    window = expectedSize === 0 ? { items: [], total: loaded.total } : loaded;
  }
  const edges = window.items.map((node, index) => ({ cursor: offsetToCursor(offset + index), node }));
  return {
    edges,
    totalCount: window.total,
    pageInfo: {
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
      hasPreviousPage: offset > 0,
      hasNextPage: offset + window.items.length < window.total,
    },
  };
}
