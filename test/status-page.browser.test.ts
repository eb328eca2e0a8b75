import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { launchChromium, type NetworkLog, watchPage } from './support/browser.js';
import { type GraphQLResponse, startTestGateway, type TestGateway } from './support/gateway.js';
import { describeWithChromium } from './support/services.js';
import { until } from './support/until.js';

/*
 * The status page as an operator meets it: Debian's Chromium opens /status on ADMIN_PORT after a known load and reads
 * what it shows against what /metrics says at the same moment, then a route made to fail shows its breaker open. The
 * page must need nothing but the gateway: every request stays on the admin port's origin.
 */

const ARTIFACTS = fileURLToPath(new URL('./.artifacts/', import.meta.url));
/** Long enough that only a test's own release answers it. */
const HELD_MS = 60_000;
const UI_WAIT_MS = 15_000;
const listing = (first: number) => `{ heads(first: ${first}) { nodes { uuid } } }`;

/** A series of Prometheus text: its name and labels. */
const seriesOf = (text: string) => {
  const [, name, labels = ''] = /^([\w:]+)(?:\{(.*)\})?$/.exec(text)!;
  return { name: name!, labels: Object.fromEntries([...labels.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]])) };
};

/** What /metrics says of `key` (`name{label="value",…}`): the sum of its lines that have those labels, as sum by. */
function sumOf(metrics: string, key: string): number {
  const wanted = seriesOf(key);
  let sum = 0;
  for (const line of metrics.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const at = line.lastIndexOf(' ');
    const { name, labels } = seriesOf(line.slice(0, at));
    if (name === wanted.name && Object.entries(wanted.labels).every(([label, value]) => labels[label] === value))
      sum += Number(line.slice(at + 1));
  }
  return sum;
}

/** Gauges that move between two reads whatever the test does. */
const moving = /^(gateway_shedding_event_loop_delay_seconds|process_|nodejs_)/;

describeWithChromium('the status page in Chromium', { shuffle: false }, () => {
  let t: TestGateway;
  let browser: Browser | undefined;
  let page: Page;
  let network: NetworkLog;
  const blocked: string[] = [];

  beforeAll(async () => {
    // Two operations in flight at most: a third from the same caller is refused for overload (its fair share).
    t = await startTestGateway({ env: { ADMIN_PORT: '0', SHED_MAX_IN_FLIGHT: '2', RESPONSE_CACHE_TTL_MS: '60000' } });
    browser = await launchChromium();
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.route(
      (url) => url.origin !== t.admin,
      (route) => {
        blocked.push(route.request().url());
        return route.abort('blockedbyclient');
      },
    );
    page = await context.newPage();
    network = watchPage(page, t.admin!);
  });

  afterAll(async () => {
    await browser?.close();
    t?.reference.releaseHeld();
    await t?.close();
  });

  /** Opens the page afresh (the readiness check answered first, so the page's own asks the upstream nothing). */
  async function open(): Promise<void> {
    expect((await fetch(`${t.admin}/ready`)).status).toBe(200);
    const response = await page.goto(`${t.admin}/status`, { waitUntil: 'load' });
    expect(response?.status()).toBe(200);
    await page.waitForSelector('body[data-renders]', { timeout: UI_WAIT_MS });
  }

  /**
   * The page's totals, and /metrics as it was both before and after the page read them: a readiness probe (an upstream
   * call) that falls between the two, once the cached answer expired, is waited out, up to three times.
   */
  async function pageBetweenScrapes() {
    const scrape = async () => (await fetch(`${t.admin}/metrics`)).text();
    const calls = (text: string) => sumOf(text, 'gateway_upstream_call_duration_seconds_count');
    for (let attempt = 1; ; attempt++) {
      const before = await scrape();
      await open();
      const totals = await page.$$eval('#totals tr', (rows) =>
        rows.map((row) => ({
          key: row.dataset.series!,
          value: Number(row.dataset.value),
          shown: row.lastElementChild!.textContent,
        })),
      );
      const metrics = await scrape();
      if (calls(before) === calls(metrics) || attempt === 3) return { metrics, totals };
    }
  }

  it('after a known load shows what /metrics says: operations by outcome, refusals, upstream calls by route, cache hits', async () => {
    for (let i = 0; i < 4; i++) expect((await t.execute(listing(2))).errors).toBeUndefined();
    // Two held at the upstream, so three more from the same caller are refused.
    t.reference.injectFault('listHeads', { kind: 'latency', ms: HELD_MS }, 2);
    const held = [t.execute(listing(5)), t.execute(listing(6))];
    await until(() => t.reference.inFlight() === 2, 'two listings held at the upstream');
    const refused: GraphQLResponse[] = [];
    for (let i = 0; i < 3; i++) refused.push(await t.execute(listing(7 + i)));
    expect(refused.map((r) => r.errors?.[0]?.extensions?.code)).toEqual(['OVERLOADED', 'OVERLOADED', 'OVERLOADED']);

    await open();
    const holders = await page.$$eval('#holders tr', (rows) => rows.map((row) => row.textContent));
    // One caller, by its address (no token), hashed: the address is nowhere on the page.
    expect(holders).toEqual([expect.stringMatching(/^address:[\w-]{12}2$/)]);
    expect(await page.locator('body').textContent()).not.toContain('127.0.0.1');
    t.reference.releaseHeld();
    for (const answer of await Promise.all(held)) expect(answer.errors).toBeUndefined();

    const { metrics, totals } = await pageBetweenScrapes();
    const compared = totals.filter(({ key }) => !moving.test(key));
    expect(compared.length).toBeGreaterThan(10);
    for (const { key, value, shown } of compared) {
      expect({ key, value }).toEqual({ key, value: sumOf(metrics, key) });
      if (Number.isInteger(value)) expect(shown).toBe(value.toLocaleString('en'));
    }
    const figure = (key: string) => totals.find((row) => row.key === key)?.value;
    expect(figure('gateway_operation_duration_seconds_count{outcome="ok"}')).toBe(6);
    expect(figure('gateway_overload_refusals_total{reason="caller_share"}')).toBe(3);
    expect(figure('gateway_refusals_total{limit="overloaded"}')).toBe(3);
    // The same listing four times: one miss, three answers from the response cache.
    expect(figure('gateway_response_cache_lookups_total{result="hit"}')).toBe(3);
    expect(figure('gateway_operations_in_flight')).toBe(0);
    const listHeads = page.locator('tr[data-route="listHeads"]');
    expect(Number(await listHeads.locator('.calls').textContent())).toBe(
      sumOf(metrics, 'gateway_upstream_call_duration_seconds_count{operation="listHeads"}'),
    );
    expect(await listHeads.locator('.breaker').textContent()).toBe('closed');
    expect(await page.locator('#state').textContent()).toBe('healthy');
  }, 60_000);

  it('draws its charts with the uPlot the gateway serves, and asks nothing of any other origin', async () => {
    await open();
    // The first point comes one interval after the sampler's first reading.
    await until(async () => (await page.locator('#charts canvas').count()) >= 6, 'charts drawn', UI_WAIT_MS, 200);
    const captions = await page.locator('#charts figure:not([hidden]) figcaption').allTextContents();
    expect(captions).toEqual(
      expect.arrayContaining([
        'Operations per second, by outcome',
        'Latency of the operations answered (refusals aside), ms',
        'Upstream calls per second, by route',
        'Operations in flight',
        'Refusals per second, by limit (overloaded: by reason)',
        'Response cache lookups per second',
      ]),
    );
    const legend = (chart: string) => page.locator(`[data-chart="${chart}"] .u-legend .u-label`).allTextContents();
    expect(await legend('ops')).toEqual(['ok']);
    // Of the overload reasons (each a series from the start, at 0), the one that moved.
    expect(await legend('refused')).toEqual(['overloaded:caller_share']);
    expect(await legend('latency')).toEqual(['p50', 'p99']);
    expect(network.requests.map((r) => new URL(r.url).pathname)).toEqual(
      expect.arrayContaining(['/status', '/status/uPlot.iife.min.js', '/status/uPlot.min.css', '/status/samples']),
    );
    expect(network.outsideRequests()).toEqual([]);
    expect(blocked).toEqual([]);
    expect([...network.pageErrors, ...network.consoleErrors, ...network.failed.map((f) => f.url)]).toEqual([]);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}status-page.png`, fullPage: true });
  }, 30_000);

  it('shows the breaker of a failing route open on that route, the others closed, and says so at a glance', async () => {
    t.reference.injectFault('listHeads', { kind: 'status', status: 503 }, 1_000);
    // Listings not cached (each its own size) until listHeads' breaker opens (CIRCUIT_BREAKER_* defaults).
    let first = 20;
    const breaker = async () =>
      sumOf(await (await fetch(`${t.admin}/metrics`)).text(), 'gateway_upstream_circuit_state{operation="listHeads"}');
    await until(async () => {
      await t.execute(listing(first++));
      return (await breaker()) === 1;
    }, "listHeads' breaker open");
    await open();
    expect(await page.locator('tr[data-route="listHeads"] .breaker').textContent()).toBe('open');
    const others = await page.locator('tr[data-route]:not([data-route="listHeads"]) .breaker').allTextContents();
    expect(others.length).toBeGreaterThanOrEqual(10);
    expect(new Set(others)).toEqual(new Set(['closed']));
    expect(Number(await page.locator('tr[data-route="listHeads"] .faults').textContent())).toBeGreaterThanOrEqual(5);
    expect(await page.locator('#state').textContent()).toBe('degraded');
    expect(await page.locator('#reasons li').allTextContents()).toContain('listHeads: breaker open');
    t.reference.clearFaults();
  }, 30_000);
});
