import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defaultTracingSettings, loadConfig } from '../src/config.js';
import { Need } from '../src/domain/needs.js';
import { RequestLoaders } from '../src/loaders/request-loaders.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { createTracing } from '../src/telemetry/tracing.js';
import { UpstreamError } from '../src/upstream/errors.js';
import { listHeads } from '../src/upstream/heads.js';
import { defaultRoutes } from '../src/upstream/routes.js';
import { createUpstream, type Upstream } from '../src/upstream/upstream.js';
import { until } from './support/until.js';

let reference: ReferenceUpstream;
let upstream: Upstream;
let allIds: string[];

const loadersFor = (authorization?: string, fanout = 10) =>
  new RequestLoaders(upstream.forRequest({ requestId: 'loader-test', authorization }), {
    fanout,
    strategy: 'selection',
  });
const calls = (operation: string) => reference.requests.filter((r) => r.operation === operation);
const operations = () => reference.requests.map((r) => r.operation).sort();

beforeAll(async () => {
  reference = await startReferenceUpstream();
  const configured = loadConfig({});
  upstream = createUpstream({
    baseUrl: reference.url,
    routes: defaultRoutes,
    timeoutMs: 5_000,
    connections: 32,
    keepAliveTimeoutMs: configured.upstreamKeepAliveMs,
    maxResponseBytes: configured.upstreamMaxResponseBytes,
    tracing: createTracing(defaultTracingSettings),
  });
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

describe('the head loader', () => {
  it('deduplicates concurrent and repeated loads of one head within a request', async () => {
    const { heads } = loadersFor();
    const id = allIds[3]!;
    const records = await Promise.all([1, 2, 3, 4, 5].map(() => heads.load(id, Need.head)));
    expect(records.every((r) => r === records[0] && r.id === id && r.head?.id === id)).toBe(true);
    await heads.load(id, Need.head);
    expect(operations()).toEqual(['getHeadById']);
  });

  it('merges the needs of one tick into the cheapest covering read', async () => {
    const { heads } = loadersFor();
    const id = allIds[0]!;
    const [a, b] = await Promise.all([heads.load(id, Need.head), heads.load(id, Need.metadata)]);
    expect(a).toBe(b);
    expect(b.available & Need.metadata).toBe(Need.metadata);
    // head + head_metadata: one Get Head Ext By Id (variant B), not two reads.
    expect(operations()).toEqual(['getHeadExtById']);
  });

  it('reads only what the request lacks: a later need the first read carried costs nothing, one it did not costs one read', async () => {
    const { heads } = loadersFor();
    const id = allIds.find((i) => i !== allIds[0])!;
    await heads.load(id, Need.metadata | Need.hairB);
    await heads.load(id, Need.head | Need.hairB);
    expect(operations()).toEqual(['getHeadExtById']);
    const record = await heads.with(await heads.load(id, Need.head), Need.variantA);
    expect(record.part('variantA').updated_at).toBeDefined();
    expect(operations()).toEqual(['getHeadExt', 'getHeadExtById']);
  });

  it('fields of both variants: both reads at once, in flight together', async () => {
    const { heads } = loadersFor();
    const id = allIds[5]!;
    reference.injectFault('getHeadExt', { kind: 'latency', ms: 600_000 });
    reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 });
    const loading = heads.load(id, Need.variantA | Need.hairB);
    await until(() => reference.inFlight() === 2, 'both reads held at the upstream');
    expect(reference.releaseHeld()).toBe(2);
    const record = await loading;
    expect(await heads.with(record, Need.variantA | Need.hairB)).toBe(record);
    expect(record.part('variantA').id).toBe(id);
    expect(record.part('hairB').id).toBe(id);
    expect(operations()).toEqual(['getHeadById', 'getHeadExt']);
    expect(reference.maxInFlight()).toBe(2);
  });

  it('caches nothing across requests and forwards each request its own token', async () => {
    const id = allIds[1]!;
    await Promise.all([
      loadersFor('Bearer token-a').heads.load(id, Need.head),
      loadersFor('Bearer token-b').heads.load(id, Need.head),
    ]);
    expect(
      calls('getHeadById')
        .map((r) => r.headers.authorization)
        .sort(),
    ).toEqual(['Bearer token-a', 'Bearer token-b']);
  });

  it('fans out concurrently under the cap', async () => {
    const ids = allIds.slice(10, 30);
    // Every read held at the upstream until released: the cap, not timing, decides how many are out.
    reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 }, ids.length);
    const { heads } = loadersFor(undefined, 4);
    const loading = Promise.all(ids.map((id) => heads.load(id, Need.head)));
    for (let released = 0; released < ids.length; ) {
      await until(
        () => reference.inFlight() === Math.min(4, ids.length - released),
        'the capped reads held at the upstream',
      );
      released += reference.releaseHeld();
    }
    const records = await loading;
    expect(records.map((r) => r.id)).toEqual(ids);
    expect(calls('getHeadById')).toHaveLength(20);
    expect(reference.maxInFlight()).toBe(4);
  });

  it('holds the cap when the other reads come while the first is out, and when they follow one another', async () => {
    const ids = allIds.slice(30, 42);
    reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 }, ids.length);
    const { heads } = loadersFor(undefined, 4);
    const first = heads.load(ids[0]!, Need.head);
    await until(() => reference.inFlight() === 1, 'the first read held at the upstream');
    const others = Promise.all(ids.slice(1).map((id) => heads.load(id, Need.head)));
    for (let released = 0; released < ids.length; ) {
      await until(
        () => reference.inFlight() === Math.min(4, ids.length - released),
        'the capped reads held at the upstream',
      );
      released += reference.releaseHeld();
    }
    expect([(await first).id, ...(await others).map((r) => r.id)]).toEqual(ids);
    expect(reference.maxInFlight()).toBe(4);
    // One after another: each alone, none waiting.
    const { heads: sequential } = loadersFor(undefined, 4);
    for (const id of allIds.slice(42, 45)) expect((await sequential.load(id, Need.head)).id).toBe(id);
    expect(calls('getHeadById')).toHaveLength(15);
  });

  it('fails only the head whose read failed', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';
    const { heads } = loadersFor();
    const [found, lost] = await Promise.allSettled([heads.load(allIds[2]!, Need.head), heads.load(missing, Need.head)]);
    expect(found).toMatchObject({ status: 'fulfilled', value: { id: allIds[2] } });
    expect(lost.status).toBe('rejected');
    expect((lost as PromiseRejectedResult).reason).toBeInstanceOf(UpstreamError);
    expect(((lost as PromiseRejectedResult).reason as UpstreamError).code).toBe('NOT_FOUND');
  });

  it('a listed head is seeded: what the listing carried needs no read, and Hair B of a head without hair none either', async () => {
    const loaders = loadersFor();
    const window = await loaders.listHeadsWindow({}, 0, 20);
    reference.resetRecording();
    const hairless = window.items.find((r) => !r.head!.hair)!;
    expect(hairless).toBeDefined();
    expect(await loaders.heads.load(window.items[0]!.id, Need.variantA)).toBe(window.items[0]);
    expect(await loaders.heads.load(hairless.id, Need.hairB)).toBe(hairless);
    expect(reference.requests).toEqual([]);
  });

  it('forgets a head after an update: the next load reads it again', async () => {
    const { heads } = loadersFor();
    const id = allIds[6]!;
    const before = await heads.load(id, Need.head);
    heads.forget(id);
    const after = await heads.load(id, Need.head);
    expect(after).not.toBe(before);
    expect(calls('getHeadById')).toHaveLength(2);
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
    const window = await loadersFor('Bearer not-issued')
      .listPermissionsWindow(0, 5)
      .catch((e: unknown) => e);
    expect(window).toBeInstanceOf(UpstreamError);
    expect((window as UpstreamError).code).toBe('UNAUTHENTICATED');
    expect(calls('getPermissions')[0]!.headers.authorization).toBe('Bearer not-issued');
  });
});
