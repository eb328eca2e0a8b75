import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RequestLoaders } from '../src/loaders/request-loaders.js';
import { startReferenceUpstream, type ReferenceUpstream } from '../src/reference-upstream/server.js';
import { UpstreamError } from '../src/upstream/errors.js';
import { listHeads } from '../src/upstream/heads.js';
import { defaultRoutes } from '../src/upstream/routes.js';
import { createUpstream, type Upstream } from '../src/upstream/upstream.js';

let reference: ReferenceUpstream;
let upstream: Upstream;
let allIds: string[];

const loadersFor = (authorization?: string, fanout?: number) =>
  new RequestLoaders(upstream.forRequest({ requestId: 'loader-test', authorization }), { fanout });
const calls = (operation: string) => reference.requests.filter((r) => r.operation === operation);

beforeAll(async () => {
  reference = await startReferenceUpstream();
  upstream = createUpstream({ baseUrl: reference.url, routes: defaultRoutes, timeoutMs: 5_000, connections: 32 });
  const caller = upstream.forRequest({ requestId: 'setup' });
  const pages = await Promise.all([1, 2].map((page) => listHeads(caller, { page, size: 100 })));
  allIds = pages.flatMap((p) => p.items.map((h) => h.id));
});

afterAll(async () => {
  await upstream.close();
  await reference.close();
});

beforeEach(() => {
  reference.clearFaults();
  reference.resetRecording();
});

describe('by-id loaders', () => {
  it('deduplicate concurrent and repeated reads of one id within a request', async () => {
    const loaders = loadersFor();
    const id = allIds[3]!;
    const heads = await Promise.all([1, 2, 3, 4, 5].map(() => loaders.headExt.load(id)));
    expect(heads.every((h) => h.id === id)).toBe(true);
    await loaders.headExt.load(id);
    expect(calls('getHeadExt')).toHaveLength(1);
  });

  it('keep one loader per read: variant A ext, variant B and variant B ext are separate calls', async () => {
    const loaders = loadersFor();
    const id = allIds[0]!;
    await Promise.all([loaders.headExt.load(id), loaders.headById.load(id), loaders.headExtById.load(id), loaders.headById.load(id)]);
    expect(reference.requests.map((r) => r.operation).sort()).toEqual(['getHeadById', 'getHeadExt', 'getHeadExtById']);
  });

  it('cache nothing across requests and forward each request its own token', async () => {
    const id = allIds[1]!;
    await Promise.all([loadersFor('Bearer token-a').headExt.load(id), loadersFor('Bearer token-b').headExt.load(id)]);
    expect(calls('getHeadExt').map((r) => r.headers.authorization).sort()).toEqual(['Bearer token-a', 'Bearer token-b']);
  });

  it('fan out concurrently under the cap', async () => {
    const ids = allIds.slice(10, 30);
    reference.injectFault('getHeadExt', { kind: 'latency', ms: 40 }, ids.length);
    const heads = await loadersFor(undefined, 4).headExt.loadMany(ids);
    expect(heads.map((h) => (h instanceof Error ? h : h.id))).toEqual(ids);
    expect(calls('getHeadExt')).toHaveLength(20);
    expect(reference.maxInFlight()).toBe(4);
  });

  it('fail only the key whose read failed', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';
    const [found, lost] = await loadersFor().headExt.loadMany([allIds[2]!, missing]);
    expect(found).toMatchObject({ id: allIds[2] });
    expect(lost).toBeInstanceOf(UpstreamError);
    expect((lost as UpstreamError).code).toBe('NOT_FOUND');
  });
});

describe('list windows', () => {
  it('cover a window with one page call and never fetch the same page twice in a request', async () => {
    const loaders = loadersFor();
    const [a, b] = await Promise.all([loaders.listHeadsWindow({}, 90, 10), loaders.listHeadsWindow({}, 90, 10)]);
    expect(a.items.map((h) => h.id)).toEqual(allIds.slice(90, 100));
    expect(b).toEqual(a);
    expect(a.total).toBeGreaterThanOrEqual(250);
    expect(calls('listHeads')).toHaveLength(1);
    expect(calls('listHeads')[0]!.query).toEqual({ page: '10', size: '10' });

    // [95, 105) sits inside one page of 15 ([90, 105)): still one call.
    const straddling = await loaders.listHeadsWindow({}, 95, 10);
    expect(straddling.items.map((h) => h.id)).toEqual(allIds.slice(95, 105));
    expect(calls('listHeads')[1]!.query).toEqual({ page: '7', size: '15' });
  });

  it('use two calls when no single page holds the window, and keep filters in the key', async () => {
    const loaders = loadersFor();
    const window = await loaders.listHeadsWindow({}, 1, 100);
    expect(window.items.map((h) => h.id)).toEqual(allIds.slice(1, 101));
    expect(calls('listHeads')).toHaveLength(2);

    await loaders.listHeadsWindow({ search: 'zz-no-such-head' }, 1, 100);
    const filtered = calls('listHeads').slice(2);
    expect(filtered.length).toBeGreaterThan(0);
    expect(filtered.every((r) => r.query.search === 'zz-no-such-head')).toBe(true);
  });

  it('page permissions with the caller token', async () => {
    const window = await loadersFor('Bearer not-issued').listPermissionsWindow(0, 5).catch((e: unknown) => e);
    expect(window).toBeInstanceOf(UpstreamError);
    expect((window as UpstreamError).code).toBe('UNAUTHENTICATED');
    expect(calls('getPermissions')[0]!.headers.authorization).toBe('Bearer not-issued');
  });
});
