import DataLoader from 'dataloader';
import pLimit, { type LimitFunction } from 'p-limit';
import { getHeadById, getHeadExt, getHeadExtById, listHeads, listHeadsExt, type ListHeadsArgs, type ListHeadsExtArgs } from '../upstream/heads.js';
import { planPageWindow, sliceWindow, type PageCall } from '../upstream/page-windows.js';
import { getPermissions } from '../upstream/permissions.js';
import type { HeadADto, HeadBDto, PageDto, PermissionDto } from '../upstream/schemas.js';
import type { UpstreamCaller } from '../upstream/transport.js';

export interface HeadsFilter {
  readonly search?: string | undefined;
  readonly style?: string | undefined;
}

/**
 * A window of a listing: the items at [offset, offset+limit), and what the calls told about the
 * rest: the listing's total (page wrappers carry it) or just whether more items follow.
 */
export interface ListWindow<T> {
  readonly items: T[];
  readonly total?: number | undefined;
  readonly hasMore?: boolean | undefined;
}

/** The per-head facets the loaders keep (see RequestLoaders). */
export type HeadFacet = 'headA' | 'headMetadata' | 'headB';

export interface LoaderOptions {
  /** How many upstream calls one request may have in flight at once. @default 10 */
  readonly fanout?: number | undefined;
  /**
   * Whether reads are chosen by what the operation selects (issue "Performance"). Off, variant B
   * fields are read through Get Head Ext By Id (variant B), as the default plan says. @default true
   */
  readonly planner?: boolean | undefined;
}

/**
 * The DataLoaders of one incoming request. They hold that request's caller (and so its token):
 * made per request, never shared, so nothing cached here outlives the request or crosses callers.
 *
 * Two layers: one loader per upstream read (deduplicated and cached for the request), and three
 * per-head "facets" resolvers ask for — variant A fields, head_metadata, variant B fields. Every
 * read primes every facet it answers, so a later field of the same head costs nothing.
 */
export class RequestLoaders {
  readonly #caller: UpstreamCaller;
  readonly #fanout: number;
  readonly #planner: boolean;
  #limit: LimitFunction | undefined;
  // Made on first use: most operations touch one or two of them, and a request that makes all
  // nine DataLoaders up front pays for it on every small query.
  #headExt: DataLoader<string, HeadADto> | undefined;
  #headById: DataLoader<string, HeadBDto> | undefined;
  #headExtById: DataLoader<string, HeadBDto> | undefined;
  #headsPage: DataLoader<ListHeadsArgs, PageDto<HeadADto>, string> | undefined;
  #headsExtWindow: DataLoader<ListHeadsExtArgs, HeadBDto[], string> | undefined;
  #permissionsPage: DataLoader<PageCall, PageDto<PermissionDto>, string> | undefined;
  #headA: DataLoader<string, HeadADto> | undefined;
  #headMetadata: DataLoader<string, unknown> | undefined;
  #headB: DataLoader<string, HeadBDto> | undefined;
  /** The facets' cache maps, ours so the planner can ask what the request already knows. */
  readonly #known = { headA: new Map<string, Promise<HeadADto>>(), headMetadata: new Map<string, Promise<unknown>>(), headB: new Map<string, Promise<HeadBDto>>() };

  constructor(caller: UpstreamCaller, options: LoaderOptions = {}) {
    this.#caller = caller;
    this.#fanout = options.fanout ?? 10;
    this.#planner = options.planner ?? true;
  }

  /** Get Head Ext By Id, variant A: Head A with head_metadata. */
  get headExt(): DataLoader<string, HeadADto> {
    return (this.#headExt ??= this.#byKey(async (id: string) => this.#primeA(await getHeadExt(this.#caller, id), true)));
  }

  /** Get Head By Id: Head B without head_metadata. */
  get headById(): DataLoader<string, HeadBDto> {
    return (this.#headById ??= this.#byKey(async (id: string) => this.#primeB(await getHeadById(this.#caller, id), false)));
  }

  /** Get Head Ext By Id, variant B: Head B with head_metadata. */
  get headExtById(): DataLoader<string, HeadBDto> {
    return (this.#headExtById ??= this.#byKey(async (id: string) => this.#primeB(await getHeadExtById(this.#caller, id), true)));
  }

  get headsPage(): DataLoader<ListHeadsArgs, PageDto<HeadADto>, string> {
    return (this.#headsPage ??= this.#byKey((key: ListHeadsArgs) => listHeads(this.#caller, key), json));
  }

  get headsExtWindow(): DataLoader<ListHeadsExtArgs, HeadBDto[], string> {
    return (this.#headsExtWindow ??= this.#byKey(async (key: ListHeadsExtArgs) => (await listHeadsExt(this.#caller, key)).map((head) => this.#primeB(head, true)), json));
  }

  get permissionsPage(): DataLoader<PageCall, PageDto<PermissionDto>, string> {
    return (this.#permissionsPage ??= this.#byKey((key: PageCall) => getPermissions(this.#caller, key), json));
  }

  /** The freshest variant A fields of a head: primed by listings, updates and extended reads. */
  get headA(): DataLoader<string, HeadADto> {
    return (this.#headA ??= facet((id) => this.headExt.load(id), this.#known.headA));
  }

  /** A head's head_metadata (null when it has none): primed by every extended read. */
  get headMetadata(): DataLoader<string, unknown> {
    return (this.#headMetadata ??= facet(async (id) => (await this.headExt.load(id)).head_metadata ?? null, this.#known.headMetadata));
  }

  /** The variant B fields of a head (Hair B among them): primed by every variant B read. */
  get headB(): DataLoader<string, HeadBDto> {
    return (this.#headB ??= facet((id) => (this.#planner ? this.headById : this.headExtById).load(id), this.#known.headB));
  }

  /** A loader of one upstream read, under the request's one fan-out cap. */
  #byKey<K, V, C = K>(load: (key: K) => Promise<V>, cacheKeyFn?: (key: K) => C): DataLoader<K, V, C> {
    // One cap for all loaders: it bounds what one request can put on the upstream at once.
    const limit = (this.#limit ??= pLimit(this.#fanout));
    return new DataLoader<K, V, C>((keys) => Promise.all(keys.map((key) => limit(() => load(key)).catch((error: unknown) => error as Error))), {
      ...(cacheKeyFn ? { cacheKeyFn } : {}),
    });
  }

  /** Whether the request already has (or is loading) this facet of the head. */
  knows(facet: HeadFacet, id: string): boolean {
    return this.#known[facet].has(id);
  }

  #primeA(head: HeadADto, extended: boolean): HeadADto {
    this.headA.prime(head.id, head);
    if (extended) this.headMetadata.prime(head.id, head.head_metadata ?? null);
    return head;
  }

  #primeB(head: HeadBDto, extended: boolean): HeadBDto {
    this.headB.prime(head.id, head);
    if (extended) this.headMetadata.prime(head.id, head.head_metadata ?? null);
    return head;
  }

  /** The heads at [offset, offset+limit) of Get Heads (variant A), in the fewest page calls. */
  async listHeadsWindow(filter: HeadsFilter, offset: number, limit: number): Promise<ListWindow<HeadADto>> {
    const window = await loadWindow(offset, limit, (call) => this.headsPage.load({ search: filter.search, style: filter.style, ...call }));
    for (const head of window.items) this.#primeA(head, false);
    return window;
  }

  /**
   * The heads at [offset, offset+limit) of Get Heads Ext (variant B with head_metadata) in one
   * call, asking one row more to learn whether more follow. Get Heads Ext has no style filter.
   */
  async listHeadsExtWindow(search: string | undefined, offset: number, limit: number): Promise<ListWindow<HeadBDto>> {
    const rows = await this.headsExtWindow.load({ limit: limit + 1, skip: offset, search });
    return { items: rows.slice(0, limit), hasMore: rows.length > limit };
  }

  /** How many heads Get Heads lists for the filter: one page of one. */
  async countHeads(filter: HeadsFilter): Promise<number> {
    return (await this.headsPage.load({ search: filter.search, style: filter.style, page: 1, size: 1 })).total;
  }

  /** The permissions at [offset, offset+limit) of Get Permissions, in the fewest page calls. */
  listPermissionsWindow(offset: number, limit: number): Promise<ListWindow<PermissionDto>> {
    return loadWindow(offset, limit, (call) => this.permissionsPage.load(call));
  }

  /** After Update Head: earlier reads of the head are stale, the answer is the freshest Head A. */
  rememberUpdatedHead(head: HeadADto): void {
    this.forgetHead(head.id);
    this.headA.prime(head.id, head);
  }

  /** After Delete Head, or an update: nothing read of this head earlier in the request is true now. */
  forgetHead(id: string): void {
    for (const loader of [this.#headA, this.#headMetadata, this.#headB, this.#headExt, this.#headById, this.#headExtById]) loader?.clear(id);
  }
}

const json = (key: object) => JSON.stringify(key);

/** A facet loads through one of the read loaders; those prime it on the way. */
function facet<V>(load: (id: string) => Promise<V>, cacheMap: Map<string, Promise<V>>): DataLoader<string, V> {
  return new DataLoader<string, V>((ids) => Promise.all(ids.map((id) => load(id).catch((error: unknown) => error as Error))), { cacheMap });
}

async function loadWindow<T>(offset: number, limit: number, loadPage: (call: PageCall) => Promise<PageDto<T>>): Promise<ListWindow<T>> {
  const plan = planPageWindow(offset, limit);
  const pages = await Promise.all(plan.calls.map(loadPage));
  return { items: sliceWindow(plan, pages.map((p) => p.items)), total: pages[0]!.total };
}
