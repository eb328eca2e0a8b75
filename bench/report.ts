import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** One scenario measured once. */
export interface Measurement {
  readonly reqPerSec: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** Requests completed in the measured phase (any status). */
  readonly requests: number;
  readonly non2xx: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  /** Upstream calls during the measured phase divided by `requests`. */
  readonly callsPerOp: number;
  /** Upstream calls by operation (non-zero only). */
  readonly upstreamCalls: Readonly<Record<string, number>>;
  /** Gateway RSS right after the measured phase. */
  readonly rssBytes: number | undefined;
  /** reqPerSec / the direct call's reqPerSec in the same round (of the same phase). */
  ratio: number | undefined;
}

export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

const summarized = ['reqPerSec', 'p50Ms', 'p99Ms', 'callsPerOp', 'ratio', 'rssBytes'] as const;
type SummarizedMetric = (typeof summarized)[number];

export interface ScenarioResult {
  readonly name: string;
  readonly description: string;
  /** 'ok', or what was wrong with the one response checked before the load. */
  readonly check: string;
  /** One entry per round. */
  readonly rounds: Measurement[];
  summary?: Partial<Record<SummarizedMetric, Spread>>;
  /** Summed over rounds: any non-zero value deserves a look. */
  totals?: { requests: number; non2xx: number; errors: number };
}

export interface BenchReport {
  readonly meta: {
    readonly startedAt: string;
    readonly finishedAt: string;
    readonly git: string;
    readonly node: string;
    readonly cpu: string;
    readonly cpus: number;
    readonly pinning: string;
    /** --cores: which phases ran (one core for `rounds` rounds, then all cores for one). */
    readonly cores: 'one' | 'all' | 'both';
    readonly connections: number;
    readonly warmupSec: number;
    readonly durationSec: number;
    readonly rounds: number;
    readonly workers: number | undefined;
    readonly gatewayCommand: string;
    /** Environment given to the gateway (besides UPSTREAM_URL). */
    readonly gatewayEnv: Readonly<Record<string, string>>;
    readonly rssSource: string;
    /** Lines the gateway wrote to stdout/stderr after start-up (with LOG_LEVEL=warn: warnings and errors). */
    readonly gatewayLogLines: number;
    readonly gatewayLogSamples: readonly string[];
  };
  /** The one-core phase; empty with --cores all. */
  readonly scenarios: ScenarioResult[];
  /** Gateway RSS after the last scenario of round 1 and of the last round: growth hints at a leak. */
  readonly rss: { readonly afterRound1: number | undefined; readonly afterLastRound: number | undefined };
  readonly allCores?: AllCores;
}

/**
 * One round against a second gateway started with WORKERS=auto, direct included so its ratios are taken in the same
 * phase.
 */
export interface AllCores {
  readonly workers: number;
  readonly pinning: string;
  readonly scenarios: ScenarioResult[];
  /** The primary and its workers, after the last scenario. */
  readonly rssAfterRun: number | undefined;
  readonly gatewayLogLines: number;
  readonly gatewayLogSamples: readonly string[];
}

function spread(values: readonly (number | undefined)[]): Spread | undefined {
  const sorted = values.filter((v): v is number => v !== undefined && Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/** Fills `summary` and `totals` of every scenario from its rounds. */
export function summarize(scenarios: readonly ScenarioResult[]): void {
  for (const scenario of scenarios) {
    scenario.summary = {};
    for (const metric of summarized) {
      const s = spread(scenario.rounds.map((r) => r[metric]));
      if (s !== undefined) scenario.summary[metric] = s;
    }
    const sum = (pick: (m: Measurement) => number) => scenario.rounds.reduce((total, m) => total + pick(m), 0);
    scenario.totals = { requests: sum((m) => m.requests), non2xx: sum((m) => m.non2xx), errors: sum((m) => m.errors) };
  }
}

const mb = (bytes: number) => bytes / 1024 / 1024;

function cell(s: Spread | undefined, digits: number, scale: (v: number) => number = (v) => v): string {
  if (s === undefined) return '–';
  // Number() drops trailing zeros: autocannon's latencies are whole milliseconds.
  const f = (v: number) => String(Number(scale(v).toFixed(digits)));
  return s.min === s.max ? f(s.median) : `${f(s.median)} (${f(s.min)}–${f(s.max)})`;
}

function table(scenarios: readonly ScenarioResult[]): string[] {
  const lines = [
    '| scenario | req/s | p50 ms | p99 ms | calls/op | ratio | RSS MB | non-2xx / errors | check |',
    '|---|--:|--:|--:|--:|--:|--:|--:|---|',
  ];
  for (const s of scenarios) {
    const m = s.summary ?? {};
    lines.push(
      `| ${s.name} | ${cell(m.reqPerSec, 0)} | ${cell(m.p50Ms, 1)} | ${cell(m.p99Ms, 1)} | ${cell(m.callsPerOp, 2)} | ${cell(m.ratio, 3)} | ` +
        `${cell(m.rssBytes, 0, mb)} | ${s.totals?.non2xx ?? 0} / ${s.totals?.errors ?? 0} | ${s.check} |`,
    );
  }
  return lines;
}

const logLines = (count: number, samples: readonly string[]) =>
  count > 0
    ? [
        `The gateway logged ${count} line(s) at warn level or above during the run, e.g.:`,
        '',
        ...samples.map((l) => `    ${l}`),
      ]
    : [];

export function toMarkdown(report: BenchReport): string {
  const { meta, allCores } = report;
  const phases = [
    ...(meta.cores === 'all' ? [] : [`${meta.rounds} round(s) on one core`]),
    ...(allCores ? ['1 round on all cores'] : []),
  ];
  const lines = [
    `# Gateway benchmark ${meta.startedAt}`,
    '',
    `git ${meta.git} · Node ${meta.node} · ${meta.cpus}× ${meta.cpu} · ${meta.pinning}`,
    `${meta.connections} connections · ${meta.warmupSec} s warm-up + ${meta.durationSec} s measured per scenario · ${phases.join(' + ')}` +
      ` · gateway \`${meta.gatewayCommand}\` ${Object.entries(meta.gatewayEnv)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')} · RSS from ${meta.rssSource}`,
  ];
  if (meta.cores !== 'all') {
    lines.push(
      '',
      '## One core',
      '',
      ...(meta.rounds > 1 ? ['Cells: median (min–max) over rounds.', ''] : []),
      ...table(report.scenarios),
      '',
    );
    const { afterRound1, afterLastRound } = report.rss;
    if (afterRound1 !== undefined && meta.rounds === 1) {
      lines.push(`Gateway RSS after the run: ${mb(afterRound1).toFixed(1)} MB.`);
    } else if (afterRound1 !== undefined && afterLastRound !== undefined) {
      const growth = afterLastRound - afterRound1;
      lines.push(
        `Gateway RSS after round 1: ${mb(afterRound1).toFixed(1)} MB; after round ${meta.rounds}: ${mb(afterLastRound).toFixed(1)} MB (${growth >= 0 ? '+' : ''}${mb(growth).toFixed(1)} MB).`,
      );
    }
    lines.push(...logLines(meta.gatewayLogLines, meta.gatewayLogSamples));
  }
  if (allCores) {
    lines.push(
      '',
      `## All cores (WORKERS=auto, ${allCores.workers} workers, not pinned)`,
      '',
      `Pinning: ${allCores.pinning}. One round.`,
      '',
      ...table(allCores.scenarios),
      '',
    );
    if (allCores.rssAfterRun !== undefined)
      lines.push(`Gateway RSS (primary + workers) after the run: ${mb(allCores.rssAfterRun).toFixed(1)} MB.`);
    lines.push(...logLines(allCores.gatewayLogLines, allCores.gatewayLogSamples));
  }
  // Both phases measure the same scenarios.
  const described = meta.cores === 'all' ? (allCores?.scenarios ?? []) : report.scenarios;
  lines.push('', ...described.map((s) => `- **${s.name}**: ${s.description}`), '');
  return lines.join('\n');
}

/** Horizontal bars of the req/s ratio to the direct call, with a whisker for min–max and a line at 1.0. */
export function toSvg(report: BenchReport): string {
  const rows = report.scenarios.filter((s) => s.summary?.ratio !== undefined);
  const labelWidth = 70;
  const plotWidth = 400;
  const rowHeight = 28;
  const top = 36;
  const height = top + rows.length * rowHeight + 24;
  const maxRatio = Math.max(1, ...rows.map((s) => s.summary!.ratio!.max));
  const x = (ratio: number) => labelWidth + (ratio / maxRatio) * plotWidth;
  const esc = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${labelWidth + plotWidth + 150}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="8" y="20" font-size="14" font-weight="bold">${esc(`req/s relative to the direct REST call (${report.meta.startedAt})`)}</text>`,
  ];
  rows.forEach((s, i) => {
    const { median, min, max } = s.summary!.ratio!;
    const y = top + i * rowHeight;
    const mid = y + rowHeight / 2 - 2;
    parts.push(
      `<text x="8" y="${mid + 4}">${esc(s.name)}</text>`,
      `<rect x="${labelWidth}" y="${y}" width="${(x(median) - labelWidth).toFixed(1)}" height="${rowHeight - 8}" fill="${s.name === 'direct' ? '#999' : '#4a7ebb'}"/>`,
      min === max
        ? ''
        : `<line x1="${x(min).toFixed(1)}" x2="${x(max).toFixed(1)}" y1="${mid}" y2="${mid}" stroke="black"/>`,
      `<text x="${(x(max) + 6).toFixed(1)}" y="${mid + 4}">${median.toFixed(3)} · ${s.summary!.reqPerSec!.median.toFixed(0)} req/s</text>`,
    );
  });
  const one = x(1).toFixed(1);
  parts.push(
    `<line x1="${one}" x2="${one}" y1="${top - 4}" y2="${height - 20}" stroke="#c33" stroke-dasharray="4 3"/>`,
  );
  parts.push(`<text x="${one}" y="${height - 6}" text-anchor="middle" fill="#c33">1.0</text>`, '</svg>', '');
  return parts.filter(Boolean).join('\n');
}

/** Writes `<stamp>.{json,md,svg}` and `latest.{json,md,svg}`; returns the timestamped paths. */
export function writeReports(report: BenchReport, dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const stamp = report.meta.startedAt.replace(/[:.]/g, '-');
  const contents = { json: `${JSON.stringify(report, null, 2)}\n`, md: toMarkdown(report), svg: toSvg(report) };
  const written: string[] = [];
  for (const [ext, text] of Object.entries(contents)) {
    const path = join(dir, `${stamp}.${ext}`);
    writeFileSync(path, text);
    writeFileSync(join(dir, `latest.${ext}`), text);
    written.push(path);
  }
  return written;
}

export const legend = `How to read this:
  req/s     requests completed per second (autocannon's per-second average) with 16 connections by default
  p50/p99   latency percentiles in ms as seen by the load generator
  calls/op  upstream REST calls per request (from /__reference/stats); direct is 1 by definition
  ratio     req/s divided by the direct call's req/s in the same round of the same phase: the gateway's throughput cost
  RSS MB    gateway resident memory right after the scenario (all cores: the primary and its workers)
  non-2xx / errors must be 0 / 0, and check must be ok (one response inspected for GraphQL errors), or the row measures failures
  With --rounds N, cells read median (min–max); compare the RSS after round 1 and after the last round for growth.
  Pinning matters: compare runs only when the pinning line matches.`;
