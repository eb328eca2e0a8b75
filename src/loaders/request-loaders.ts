import DataLoader from 'dataloader';
import pLimit, { type LimitFunction } from 'p-limit';
import type { HeadRead, Strategy } from '../domain/needs.js';
import { type PageCall, sliceWindow } from '../domain/page-windows.js';
import { COUNT_CALL, extWindow, type HeadFilter, pageCalls } from '../plan/windows.js';
import {
  getHeadById,
  getHeadExt,
  getHeadExtById,
  type ListHeadsArgs,
  type ListHeadsExtArgs,
  listHeads,
  listHeadsExt,
} from '../upstream/heads.js';
import { getPermissions } from '../upstream/permissions.js';
import type { HeadADto, HeadBDto, PageDto, PermissionDto } from '../upstream/schemas.js';
import type { UpstreamCaller } from '../upstream/transport.js';
import { type HeadAnswer, HeadLoader, type HeadRecord } from './head-records.js';

/**
 * A window of a listing: the items at [offset, offset+size), and what the calls told about the
 * rest: the listing's total (page wrappers carry it) or just whether more items follow.
 */
export interface ListWindow<T> {
  readonly items: T[];
  readonly total?: number | undefined;
  readonly hasMore?: boolean | undefined;
}

export interface LoaderOptions {
  /** How many upstream calls one request may have in flight at once. */
  readonly fanout: number;
  /** How the head loader picks its reads (the plan's strategy). */
  readonly strategy: Strategy;
}

/**
 * The loaders of one incoming request. They hold that request's caller (and so its token):
 * made per request, never shared, so nothing cached here outlives the request or crosses callers.
 *
 * One loader of heads by id (`heads`), whose records every read fills, and one loader per
 * listing read (pages by their parameters, so the same page is fetched once per request).
 */
export class RequestLoaders {
  readonly heads: HeadLoader;
  readonly #caller: UpstreamCaller;
  readonly #fanout: number;
  /** Made once a call comes while another is in flight: most operations make one call at a time. */
  #limit: LimitFunction | undefined;
  /** A call in flight outside the limit (made before there was one). */
  #alone = false;
  // Made on first use: most operations touch one of them.
  #headsPage: DataLoader<ListHeadsArgs, PageDto<HeadADto>, string> | undefined;
  #headsExt: DataLoader<ListHeadsExtArgs, HeadBDto[], string> | undefined;
  #permissionsPage: DataLoader<PageCall, PageDto<PermissionDto>, string> | undefined;

  constructor(caller: UpstreamCaller, options: LoaderOptions) {
    this.#caller = caller;
    this.#fanout = options.fanout;
    this.heads = new HeadLoader((read, id) => this.#capped(() => readHead(caller, read, id)), options.strategy);
  }

  /**
   * One cap for every upstream call of the request: it bounds what one request puts on the
   * upstream at once (p-limit). A call made while none is in flight goes out alone, without the
   * limit (a p-limit per request was some 8 µs, 4 % of a one-call operation); the limit is made
   * for the first call that comes while one is out, one place smaller until that one is done.
   */
  #capped<T>(call: () => Promise<T>): Promise<T> {
    if (this.#limit === undefined && !this.#alone && this.#fanout > 1) {
      this.#alone = true;
      return call().finally(() => {
        this.#alone = false;
        if (this.#limit !== undefined) this.#limit.concurrency = this.#fanout;
      });
    }
    this.#limit ??= pLimit(this.#alone ? this.#fanout - 1 : this.#fanout);
    return this.#limit(call);
  }

  #byKey<K extends object, V>(load: (key: K) => Promise<V>): DataLoader<K, V, string> {
    return new DataLoader<K, V, string>(
      (keys) => Promise.all(keys.map((key) => this.#capped(() => load(key)).catch((error: unknown) => error as Error))),
      {
        cacheKeyFn: (key) => JSON.stringify(key),
      },
    );
  }

  /** The heads at [offset, offset+size) of Get Heads (variant A), in the fewest page calls. */
  async listHeadsWindow(filter: HeadFilter, offset: number, size: number): Promise<ListWindow<HeadRecord>> {
    this.#headsPage ??= this.#byKey((key: ListHeadsArgs) => listHeads(this.#caller, key));
    const loader = this.#headsPage;
    const window = await loadPages(offset, size, (call) =>
      loader.load({ search: filter.search, style: filter.style, ...call }),
    );
    return {
      items: window.items.map((head) => this.heads.seed({ variant: 'A', head }, 'listHeads')),
      total: window.total,
    };
  }

  /** The heads at [offset, offset+size) of Get Heads Ext (variant B with head_metadata), in one call. */
  async listHeadsExtWindow(search: string | undefined, offset: number, size: number): Promise<ListWindow<HeadRecord>> {
    this.#headsExt ??= this.#byKey((key: ListHeadsExtArgs) => listHeadsExt(this.#caller, key));
    const rows = await this.#headsExt.load({ ...extWindow(offset, size), search });
    return {
      items: rows.slice(0, size).map((head) => this.heads.seed({ variant: 'B', head }, 'listHeadsExt')),
      hasMore: rows.length > size,
    };
  }

  /** How many heads Get Heads lists for the filter: one page of one. */
  async countHeads(filter: HeadFilter): Promise<number> {
    return (await this.listHeadsWindow(filter, 0, COUNT_CALL.size)).total!;
  }

  /** The permissions at [offset, offset+size) of Get Permissions, in the fewest page calls. */
  listPermissionsWindow(offset: number, size: number): Promise<ListWindow<PermissionDto>> {
    this.#permissionsPage ??= this.#byKey((key: PageCall) => getPermissions(this.#caller, key));
    const loader = this.#permissionsPage;
    return loadPages(offset, size, (call) => loader.load(call));
  }
}

/** One by-id read of a head, with the variant it answers. */
async function readHead(caller: UpstreamCaller, read: HeadRead, id: string): Promise<HeadAnswer> {
  switch (read) {
    case 'getHeadById':
      return { variant: 'B', head: await getHeadById(caller, id) };
    case 'getHeadExtById':
      return { variant: 'B', head: await getHeadExtById(caller, id) };
    case 'getHeadExt':
      return { variant: 'A', head: await getHeadExt(caller, id) };
  }
}

async function loadPages<T>(
  offset: number,
  size: number,
  loadPage: (call: PageCall) => Promise<PageDto<T>>,
): Promise<ListWindow<T>> {
  const calls = pageCalls(offset, size);
  const pages = await Promise.all(calls.map(loadPage));
  return {
    items: sliceWindow(
      { calls, offset, limit: size },
      pages.map((p) => p.items),
    ),
    total: pages[0]!.total,
  };
}
