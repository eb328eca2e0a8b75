import { afterEach, describe, expect, it, vi } from 'vitest';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import { quantile } from '../src/server/status/readings.js';
import { MAX_SERIES, POINTS, StatusSampler } from '../src/server/status/samples.js';
import { CallerShares } from '../src/server/traffic/caller-shares.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The status page (STATUS_PAGE, STATUS_PAGE_PUBLIC) over plain HTTP, and its sampler: where it is served, that its
 * points are differences of the registry's own series and never more than POINTS, that callers are shown hashed.
 * What a person sees in a browser is test/status-page.browser.test.ts.
 */

const started: TestGateway[] = [];
const start = async (env: Record<string, string>) => {
  const t = await startTestGateway({ env });
  started.push(t);
  return t;
};
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(started.splice(0).map((t) => t.close()));
});

const get = async (url: string) => {
  const response = await fetch(url);
  return { status: response.status, headers: response.headers, text: await response.text() };
};

describe('where the status page is served', () => {
  it('on ADMIN_PORT by default: the page, its figures and uPlot from the gateway itself; not on the public port', async () => {
    const t = await start({ ADMIN_PORT: '0' });
    const page = await get(`${t.admin}/status`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    // Its own script by hash, and nothing from anywhere but its own origin.
    expect(page.headers.get('content-security-policy')).toMatch(/^default-src 'none'; script-src 'self' 'sha256-/);
    expect(page.text).toContain('<script src="/status/uPlot.iife.min.js"></script>');
    expect(page.text).not.toMatch(/https?:\/\//);
    const script = await get(`${t.admin}/status/uPlot.iife.min.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(script.text).toMatch(/^\/\*! https:\/\/github.com\/leeoniya\/uPlot \(v1\.6\.\d+\) \*\/\nvar uPlot=/);
    expect((await get(`${t.admin}/status/uPlot.min.css`)).text).toContain('.uplot');
    const samples = JSON.parse((await get(`${t.admin}/status/samples`)).text);
    expect(samples).toMatchObject({ everyMs: 5_000, health: { state: 'healthy', reasons: [] }, holders: [] });
    expect(samples.now.gateway_operations_in_flight).toBe(0);

    expect((await t.gateway.fetch('http://gateway/status')).status).toBe(404);
    expect((await t.gateway.fetch('http://gateway/status/samples')).status).toBe(404);
    expect((await get(`${t.admin}/status/other`)).status).toBe(404);
  });

  it('on the public port too with STATUS_PAGE_PUBLIC=true; nowhere with STATUS_PAGE=false (the probes stay)', async () => {
    const open = await start({ STATUS_PAGE_PUBLIC: 'true' });
    expect((await open.gateway.fetch('http://gateway/status')).status).toBe(200);
    expect((await open.gateway.fetch('http://gateway/status/samples')).status).toBe(200);

    const off = await start({ ADMIN_PORT: '0', STATUS_PAGE: 'false', STATUS_PAGE_PUBLIC: 'true' });
    expect((await get(`${off.admin}/status`)).status).toBe(404);
    expect((await off.gateway.fetch('http://gateway/status')).status).toBe(404);
    expect((await get(`${off.admin}/metrics`)).status).toBe(200);
  });

  it('sampled only where it is served: with neither ADMIN_PORT nor STATUS_PAGE_PUBLIC there is no page and no sampler', async () => {
    const unseen = await start({});
    expect(unseen.status).toBeUndefined();
    expect((await unseen.gateway.fetch('http://gateway/status')).status).toBe(404);
    const seen = await start({ ADMIN_PORT: '0' });
    expect(seen.status?.sampler).toBeInstanceOf(StatusSampler);
  });
});

describe('the sampler', () => {
  /** A sampler over `metrics` whose timer never fires in the test: it samples when told, on a fake clock. */
  const sampler = (metrics: GatewayMetrics) => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    return new StatusSampler({ registry: metrics.registry, ready: async () => true }, 3_600_000);
  };
  const after = async (status: StatusSampler, ms: number) => {
    vi.setSystemTime(Date.now() + ms);
    await status.sample();
  };

  it('charts differences of the registry’s series: counters as rates, p50 and p99 from the buckets', async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const status = sampler(metrics);
    await status.sample();
    for (let i = 0; i < 100; i++) metrics.operations.observe({ operation: 'q', type: 'query', outcome: 'ok' }, 0.003);
    metrics.operations.observe({ operation: 'q', type: 'query', outcome: 'refused' }, 0.0001);
    metrics.refusals.inc({ limit: 'depth' }, 10);
    await after(status, 5_000);
    const { at, series, now } = await status.snapshot();
    status.close();
    expect(at).toHaveLength(1);
    expect(series['ops:ok']).toEqual([20]);
    expect(series['ops:refused']).toEqual([0.2]);
    expect(series['refused:depth']).toEqual([2]);
    // Every answered one in (2.5 ms, 5 ms]: histogram_quantile's linear estimate, the refused one aside.
    expect(series['latency:p50']).toEqual([3.75]);
    expect(series['latency:p99']).toEqual([4.975]);
    // The totals are the registry's, as a scrape prints them.
    expect(now['gateway_operation_duration_seconds_count{outcome="ok"}']).toBe(100);
    expect(now['gateway_refusals_total{limit="depth"}']).toBe(10);
  });

  it(`keeps ${POINTS} points at most, of ${MAX_SERIES} series at most: bounded by count, so by bytes`, async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const status = sampler(metrics);
    for (let i = 0; i <= POINTS + 20; i++) {
      metrics.refusals.inc({ limit: 'depth' }, i);
      await after(status, 5_000);
    }
    const { at, series } = await status.snapshot();
    status.close();
    expect(at).toHaveLength(POINTS);
    expect(at.at(-1)! - at[0]!).toBe(((POINTS - 1) * 5_000) / 1_000);
    // The last point is the last difference: the oldest were dropped, not the newest.
    expect(series['refused:depth']!.at(-1)).toBe((POINTS + 20) / 5);
    expect(Object.keys(series).length).toBeLessThanOrEqual(MAX_SERIES);
    for (const values of Object.values(series)) expect(values).toHaveLength(POINTS);
  });

  it('estimates quantiles as Prometheus does: within the bucket, the highest finite bound for +Inf, null for none', () => {
    expect(
      quantile(0.5, [
        [1, 0],
        [2, 10],
        [Number.POSITIVE_INFINITY, 10],
      ]),
    ).toBe(1.5);
    expect(
      quantile(0.99, [
        [1, 0],
        [2, 0],
        [Number.POSITIVE_INFINITY, 5],
      ]),
    ).toBe(2);
    expect(
      quantile(0.5, [
        [1, 0],
        [Number.POSITIVE_INFINITY, 0],
      ]),
    ).toBeNull();
  });
});

describe('the callers holding the most', () => {
  it('are shown by kind and a keyed hash: never an address or a token’s hash', () => {
    const shares = new CallerShares();
    const caller = (key: string) => ({ key, address: key, token: undefined, known: false });
    shares.hold(caller('address:10.1.2.3'), 3);
    shares.hold(caller('token:c2VjcmV0LXRva2VuLWhhc2g'), 5);
    shares.hold(caller('address:10.9.9.9'), 1);
    shares.hold(caller('events'), 2);
    const top = shares.heaviest(3);
    expect(top.map((holder) => holder.inFlight)).toEqual([5, 3, 2]);
    expect(top[0]!.caller).toMatch(/^token:[\w-]{12}$/);
    expect(top[1]!.caller).toMatch(/^address:[\w-]{12}$/);
    expect(top[2]!.caller).toBe('events');
    expect(JSON.stringify(top)).not.toMatch(/10\.1\.2\.3|c2VjcmV0/);
    // The same caller, the same hash, for the life of the process.
    expect(shares.heaviest(1)[0]!.caller).toBe(top[0]!.caller);
  });
});
