import DataLoader from 'dataloader';
import pLimit from 'p-limit';
import { getHeadById, getHeadExt, getHeadExtById, listHeads, listHeadsExt, type ListHeadsExtArgs } from '../upstream/heads.js';
import { planPageWindow, sliceWindow } from '../upstream/page-windows.js';
import { getPermissions } from '../upstream/permissions.js';
import type { HeadADto, HeadBDto, PageDto, PermissionDto } from '../upstream/schemas.js';
import type { UpstreamCaller } from '../upstream/transport.js';

export interface HeadsFilter {
  readonly search?: string | undefined;
  readonly style?: string | undefined;
}

interface PageKey {
  readonly page: number;
  readonly size: number;
}

type HeadsPageKey = HeadsFilter & PageKey;

/** A window of a listing: the items at [offset, offset+limit) and the listing's total. */
export interface ListWindow<T> {
  readonly items: T[];
  readonly total: number;
}

export interface LoaderOptions {
  /** How many upstream calls one request may have in flight at once. @default 10 */
  readonly fanout?: number;
}

/**
 * The DataLoaders of one incoming request. They hold that request's caller (and so its token):
 * made per request, never shared, so nothing cached here outlives the request or crosses callers.
 * By-id reads are deduplicated and cached for the request; list pages are keyed by their query so
 * the same page is never fetched twice in one request.
 */
export class RequestLoaders {
  /**
   * The freshest Head variant A this request has seen: primed by listings and updates, else
   * read through Get Head Ext By Id (an extended read is a Head A too, so it is shared).
   */
  readonly headA: DataLoader<string, HeadADto>;
  /** Get Head Ext By Id, variant A: Head A with head_metadata. */
  readonly headExt: DataLoader<string, HeadADto>;
  /** Get Head By Id: Head B without head_metadata. */
  readonly headB: DataLoader<string, HeadBDto>;
  /** Get Head Ext By Id, variant B: Head B with head_metadata. */
  readonly headExtB: DataLoader<string, HeadBDto>;
  readonly headsPage: DataLoader<HeadsPageKey, PageDto<HeadADto>, string>;
  readonly headsExtWindow: DataLoader<ListHeadsExtArgs, HeadBDto[], string>;
  readonly permissionsPage: DataLoader<PageKey, PageDto<PermissionDto>, string>;

  constructor(caller: UpstreamCaller, options: LoaderOptions = {}) {
    // One cap for all loaders: it bounds what one request can put on the upstream at once.
    const limit = pLimit(options.fanout ?? 10);
    const byKey = <K, V, C = K>(load: (key: K) => Promise<V>, cacheKeyFn?: (key: K) => C) =>
      new DataLoader<K, V, C>((keys) => Promise.all(keys.map((key) => limit(() => load(key)).catch((error: unknown) => error as Error))), {
        ...(cacheKeyFn ? { cacheKeyFn } : {}),
      });
    const pageKey = (key: HeadsPageKey | PageKey) => JSON.stringify(key);

    this.headExt = byKey((id: string) => getHeadExt(caller, id));
    this.headA = new DataLoader((ids) => Promise.all(ids.map((id) => this.headExt.load(id).catch((error: unknown) => error as Error))));
    this.headB = byKey((id: string) => getHeadById(caller, id));
    this.headExtB = byKey((id: string) => getHeadExtById(caller, id));
    this.headsPage = byKey((key: HeadsPageKey) => listHeads(caller, key), pageKey);
    this.headsExtWindow = byKey((key: ListHeadsExtArgs) => listHeadsExt(caller, key), (key) => JSON.stringify(key));
    this.permissionsPage = byKey((key: PageKey) => getPermissions(caller, key), pageKey);
  }

  /** The heads at [offset, offset+limit) of Get Heads, in the fewest page calls. */
  async listHeadsWindow(filter: HeadsFilter, offset: number, limit: number): Promise<ListWindow<HeadADto>> {
    const window = await loadWindow(offset, limit, (call) => this.headsPage.load({ search: filter.search, style: filter.style, ...call }));
    for (const head of window.items) this.headA.prime(head.id, head);
    return window;
  }

  /** After Update Head: earlier reads of the head are stale, the answer is the freshest Head A. */
  rememberUpdatedHead(head: HeadADto): void {
    this.forgetHead(head.id);
    this.headA.prime(head.id, head);
  }

  /** After Delete Head, or an update: nothing read of this head earlier in the request is true now. */
  forgetHead(id: string): void {
    for (const loader of [this.headA, this.headExt, this.headB, this.headExtB]) loader.clear(id);
  }

  /** The permissions at [offset, offset+limit) of Get Permissions, in the fewest page calls. */
  listPermissionsWindow(offset: number, limit: number): Promise<ListWindow<PermissionDto>> {
    return loadWindow(offset, limit, (call) => this.permissionsPage.load(call));
  }
}

async function loadWindow<T>(offset: number, limit: number, loadPage: (call: PageKey) => Promise<PageDto<T>>): Promise<ListWindow<T>> {
  const plan = planPageWindow(offset, limit);
  const pages = await Promise.all(plan.calls.map(loadPage));
  return { items: sliceWindow(plan, pages.map((p) => p.items)), total: pages[0]!.total };
}
