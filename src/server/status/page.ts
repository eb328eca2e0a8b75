import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Registry } from 'prom-client';
import { type Holder, StatusSampler, type StatusSources } from './samples.js';

/** The status page of one gateway: its sampler (stopped by `close`) and the files it serves, by path. */
export interface StatusPage {
  readonly sampler: StatusSampler;
  readonly files: ReadonlyMap<string, { readonly type: string; readonly body: string }>;
  readonly policy: string;
  close(): void;
}

/** The charts, in the page's order: the series whose key is the chart's name, or starts with it and a colon. */
const CHARTS: readonly (readonly [string, string])[] = [
  ['ops', 'Operations per second, by outcome'],
  ['latency', 'Latency of the operations answered (refusals aside), ms'],
  ['calls', 'Upstream calls per second, by route'],
  ['faults', 'Upstream faults per second (5xx, timeouts, no answer), by route'],
  ['inFlight', 'Operations in flight'],
  ['refused', 'Refusals per second, by limit (overloaded: by reason)'],
  ['lookups', 'Response cache lookups per second'],
  ['cacheEntries', 'Response cache entries'],
  ['subscriptions', 'Subscriptions open'],
  ['events', 'Subscription events per second'],
  ['redis', 'Redis connected (1) or not (0)'],
  ['fallbacks', 'Redis commands served from process memory per second, by store'],
  ['loopDelay', 'Event-loop delay (median of 500 ms), ms'],
  ['memory', 'Memory, MB'],
];

/*
 * The page's own script: it asks /status/samples every interval and draws what it answers with uPlot (served beside
 * it, from node_modules), each figure's key (its /metrics series) in a data- attribute. Plain JavaScript, no build.
 */
const SCRIPT = `'use strict';
const CHARTS = ${JSON.stringify(CHARTS)};
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22',
  '#17becf'];
const BREAKERS = ['closed', 'open', 'half-open'];
const plots = new Map();
let renders = 0;
const byId = (id) => document.getElementById(id);
function el(tag, text, attributes, children = []) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  node.append(...children);
  return node;
}
const shown = (value) => (Number.isInteger(value) ? value.toLocaleString('en') : String(Number(value.toPrecision(3))));
const td = ([value, attributes]) => el('td', typeof value === 'number' ? shown(value) : value, attributes);
// A table row: its cells as [text or number, attributes].
const row = (attributes, cells) => el('tr', undefined, attributes, cells.map(td));
const sizeOf = (figure) => ({ width: figure.clientWidth - 18, height: 170 });
let windowSeconds = 900;
function chart(figure, keys, data) {
  const series = keys.map((key, i) => ({
    label: key.includes(':') ? key.slice(key.indexOf(':') + 1) : 'value',
    stroke: COLORS[i % COLORS.length],
    width: 1.5,
  }));
  return new uPlot({
    ...sizeOf(figure),
    series: [{}, ...series],
    axes: [{}, { size: 60 }],
    legend: { live: false },
    // The whole window kept, whatever part of it has points yet.
    scales: { x: { time: true, range: (u, min, max) => [max - windowSeconds, max] } },
  }, data, figure);
}
function drawCharts(samples) {
  for (const [name, title] of CHARTS) {
    let plot = plots.get(name);
    if (plot === undefined) {
      const figure = el('figure', undefined, { 'data-chart': name }, [el('figcaption', title)]);
      byId('charts').append(figure);
      plots.set(name, (plot = { figure, keys: '', uplot: undefined }));
    }
    const all = Object.keys(samples.series).filter((key) => key === name || key.startsWith(name + ':'));
    // Of several, those that moved in the window (a flat 0 says little), or all of them when none did.
    const moved = all.filter((key) => samples.series[key].some((value) => value !== null && value !== 0));
    const keys = moved.length > 0 ? moved : all;
    const data = [samples.at, ...keys.map((key) => samples.series[key])];
    plot.figure.hidden = keys.length === 0;
    if (plot.uplot !== undefined && keys.join() === plot.keys) plot.uplot.setData(data);
    else {
      plot.uplot?.destroy();
      plot.keys = keys.join();
      plot.uplot = keys.length === 0 ? undefined : chart(plot.figure, keys, data);
    }
  }
}
function drawHealth(samples) {
  const state = byId('state');
  state.textContent = samples.health.state;
  state.className = samples.health.state.replace(' ', '-');
  const reasons = samples.health.reasons.length > 0 ? samples.health.reasons
    : ['ready; every breaker closed; no upstream fault and nothing refused for overload in the last interval'];
  byId('reasons').replaceChildren(...reasons.map((reason) => el('li', reason)));
  windowSeconds = samples.windowSeconds;
  byId('about').textContent = 'process ' + samples.pid + ', up ' + Math.round(samples.uptimeSeconds / 60) +
    ' min; a point every ' + samples.everyMs / 1000 + ' s, the last ' + Math.round(windowSeconds / 60) +
    ' min kept; read at ' + new Date().toLocaleTimeString();
}
function drawTables(samples) {
  byId('routes').replaceChildren(...samples.routes.map((route) => row({ 'data-route': route.route }, [
    [route.route],
    [BREAKERS[route.breaker] || String(route.breaker), { class: 'breaker ' + BREAKERS[route.breaker] }],
    ...['calls', 'faults', 'refused'].map((figure) => [route[figure], { class: figure + ' n' }]),
  ])));
  const routeSeries = /^gateway_upstream_(call_duration_seconds_count|circuit_state|circuit_refusals_total)\\{/;
  const totals = Object.entries(samples.now).filter(([key]) => !routeSeries.test(key));
  byId('totals').replaceChildren(...totals.map(([key, value]) =>
    row({ 'data-series': key, 'data-value': String(value) }, [[key], [value, { class: 'n' }]])));
  const holders = samples.holders.length > 0 ? samples.holders : [{ caller: 'nothing in flight', inFlight: 0 }];
  byId('holders').replaceChildren(...holders.map((holder) =>
    row({ 'data-caller': holder.caller }, [[holder.caller], [holder.inFlight, { class: 'n' }]])));
}
async function refresh() {
  let every = 5000;
  try {
    const answer = await fetch('/status/samples', { cache: 'no-store' });
    if (!answer.ok) throw new Error('HTTP ' + answer.status);
    const samples = await answer.json();
    every = samples.everyMs;
    drawHealth(samples);
    drawCharts(samples);
    drawTables(samples);
    byId('error').textContent = '';
    document.body.dataset.renders = String(++renders);
  } catch (error) {
    byId('error').textContent = 'The gateway did not answer: ' + error.message;
  }
  setTimeout(refresh, every);
}
addEventListener('resize', () => {
  for (const plot of plots.values()) plot.uplot?.setSize(sizeOf(plot.figure));
});
refresh();
`;

const STYLE = `body { font: 14px system-ui, sans-serif; margin: 16px; color: #222; }
header { display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
h1 { font-size: 20px; margin: 0; }
#state { font-weight: 700; padding: 2px 10px; border-radius: 4px; color: #fff; background: #777; }
#state.healthy { background: #2a7d2e; } #state.degraded { background: #b86e00; }
#state.not-ready { background: #b3261e; }
#reasons { margin: 6px 0 12px; } #error { color: #b3261e; } #about { color: #666; }
#charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 12px; }
figure { margin: 0; border: 1px solid #ddd; border-radius: 4px; padding: 8px; min-width: 0; }
figcaption { font-weight: 600; margin-bottom: 4px; }
.tables { display: flex; gap: 32px; flex-wrap: wrap; align-items: flex-start; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border-bottom: 1px solid #eee; padding: 2px 10px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.open { color: #b3261e; font-weight: 700; } td.half-open { color: #b86e00; font-weight: 700; }`;

const PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gateway status</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/status/uPlot.min.css">
<style>${STYLE}</style></head>
<body>
<header><h1>Gateway status</h1><span id="state">…</span><span id="about"></span><span id="error"></span></header>
<ul id="reasons"></ul>
<section id="charts"></section>
<section class="tables">
<div><h2>Upstream routes</h2><table><thead><tr><th>route</th><th>breaker</th><th>calls</th><th>faults</th>
<th>refused by its breaker</th></tr></thead><tbody id="routes"></tbody></table></div>
<div><h2>Callers holding the most in flight</h2>
<table><thead><tr><th>caller (hashed)</th><th>in flight</th></tr></thead><tbody id="holders"></tbody></table>
<h2>Totals now (as /metrics sums them)</h2>
<table><thead><tr><th>series</th><th>value</th></tr></thead><tbody id="totals"></tbody></table></div>
</section>
<script src="/status/uPlot.iife.min.js"></script>
<script>${SCRIPT}</script>
</body>
</html>
`;

/** The page's Content-Security-Policy: its own script by hash, every request to its own origin only. */
const POLICY = [
  "default-src 'none'",
  `script-src 'self' 'sha256-${createHash('sha256').update(SCRIPT).digest('base64')}'`,
  // uPlot sizes its elements by their style attributes.
  "style-src 'self' 'unsafe-inline'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "frame-ancestors 'none'",
].join('; ');

/**
 * One of uPlot's prebuilt browser files: uplot is pinned to an exact version in package.json (it publishes no
 * `exports`, and these files are its documented browser build), and test/status-page.test.ts fails if they move.
 */
const uPlot = (file: string) => readFileSync(createRequire(import.meta.url).resolve(`uplot/dist/${file}`), 'utf8');
/** Read at the first page made. */
let files: StatusPage['files'] | undefined;

/** Where the page's figures come from, as the gateway has them (gateway.ts). */
export interface StatusPageSources extends Omit<StatusSources, 'registry' | 'redis' | 'heaviest'> {
  readonly metrics: { readonly registry: Registry };
  /** REDIS_URL's connection and RESPONSE_CACHE_REDIS_URL's, where set. */
  readonly redis?: { ready(): boolean } | undefined;
  readonly cacheRedis?: { ready(): boolean } | undefined;
  /** The load shedder, made after the page: asked for only when the page is. */
  readonly shedder: () => { heaviest(count: number): readonly Holder[] };
}

/** The status page where STATUS_PAGE says: its sampler started, its files read; undefined where it is off. */
export function statusPage(settings: { readonly on: boolean }, sources: StatusPageSources): StatusPage | undefined {
  if (!settings.on) return undefined;
  const { redis, cacheRedis } = sources;
  const sampler = new StatusSampler({
    ...sources,
    registry: sources.metrics.registry,
    heaviest: (count) => sources.shedder().heaviest(count),
    redis: {
      ...(redis && { shared: () => redis.ready() }),
      ...(cacheRedis && { 'response cache': () => cacheRedis.ready() }),
    },
  });
  files ??= new Map([
    ['/status', { type: 'text/html; charset=utf-8', body: PAGE }],
    ['/status/uPlot.iife.min.js', { type: 'text/javascript; charset=utf-8', body: uPlot('uPlot.iife.min.js') }],
    ['/status/uPlot.min.css', { type: 'text/css; charset=utf-8', body: uPlot('uPlot.min.css') }],
  ]);
  return { sampler, files, policy: POLICY, close: () => sampler.close() };
}
