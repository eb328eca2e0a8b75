import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { type Config, loadConfig } from '../src/config.js';
import { exitWithHelp, integerOption, runBench, UsageError } from './cli.js';
import { cpuSeconds, procRss } from './proc.js';
import { autocannon, fixtures, HOST, pinning, root, startFlags, startServer, stop } from './processes.js';
import { type Fixtures, scenarios } from './scenarios.js';
import { memoryPer } from './subscriptions.js';

/*
 * `npm run bench:sizing`: the figures a replica's requests, limits and autoscaling are derived from
 * (docs/deploy.md#sizing). Starts the reference upstream (CPU 1) and the built gateway as `npm start` runs it (CPU 0,
 * NODE_ENV=production, every upstream call made), then: its RSS idle after a short warm-up; Q1 and Q2 each at fixed
 * rates (autocannon --overallRate, CPU 1), the gateway's CPU time from /proc over each run, its RSS sampled all along;
 * then RSS per 1,000 open SSE subscriptions, from bench:subscriptions' measure on a fresh gateway. Prints the figures
 * and the Kubernetes values derived from them.
 */

const usage = `Usage: npm run bench:sizing -- [--rates 1000,2000,4000,8000] [--seconds 20] [--warmup 5] [--connections 16] [--subscriptions 10000] [--pod-rate N]
  --rates          req/s asked of the gateway, each for --seconds, for Q1 and for Q2
  --subscriptions  SSE subscriptions opened for the memory per 1,000 (the nearer SUBSCRIPTIONS_MAX, the less one step
                   of the heap's growth weighs in it)
  --pod-rate       req/s of the heavier query one replica should take at the autoscaler's target (default: the rate
                   at which its one process reaches the target of one core)
Figures printed, and written to bench/results/sizing-<time>.json.`;

const QUERIES = ['Q1', 'Q2'] as const;
const SAMPLE_MS = 500;
/** Quiet seconds after the warm-up, over which the idle CPU is read (and at whose end the idle RSS). */
const IDLE_SECONDS = 5;
const MiB = 2 ** 20;

function options() {
  const { values } = parseArgs({
    options: {
      rates: { type: 'string', default: '1000,2000,4000,8000' },
      seconds: { type: 'string', default: '20' },
      warmup: { type: 'string', default: '5' },
      connections: { type: 'string', default: '16' },
      subscriptions: { type: 'string', default: '10000' },
      'pod-rate': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  exitWithHelp(values.help, usage);
  const rates = values.rates.split(',').map((rate) => integerOption('rates', rate.trim(), 10, 100_000));
  if (rates.length === 0) throw new UsageError('--rates: give at least one rate');
  return {
    rates,
    seconds: integerOption('seconds', values.seconds, 5, 600),
    warmup: integerOption('warmup', values.warmup, 1, 120),
    connections: integerOption('connections', values.connections, 1, 1_000),
    subscriptions: integerOption('subscriptions', values.subscriptions, 100, 30_000),
    podRate: values['pod-rate'] === undefined ? undefined : integerOption('pod-rate', values['pod-rate'], 1, 1_000_000),
  };
}
type Options = ReturnType<typeof options>;

// ---- measuring ----

/** One query at one fixed rate. */
interface RateRun {
  readonly query: string;
  readonly askedRate: number;
  readonly achievedRate: number;
  /** Achieved under 95 % of asked: the rate is past what the gateway (or the upstream) serves. */
  readonly saturated: boolean;
  /** The gateway's CPU seconds over the run / the run's seconds. */
  readonly cores: number;
  /** CPU seconds per 1,000 requests: cores / (achieved rate / 1,000). */
  readonly coresPer1000: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxRssBytes: number;
  readonly failed: number;
}

/** The gateway's RSS every SAMPLE_MS until stopped: the largest seen. */
function rssPeak(pid: number): { stop(): number } {
  let peak = procRss(pid) ?? 0;
  const timer = setInterval(() => (peak = Math.max(peak, procRss(pid) ?? 0)), SAMPLE_MS);
  return {
    stop: () => {
      clearInterval(timer);
      return Math.max(peak, procRss(pid) ?? 0);
    },
  };
}

/** `query` at `rate` req/s for `seconds`: the gateway's CPU time before and after, its RSS sampled meanwhile. */
async function atRate(pid: number, url: string, fx: Fixtures, query: string, rate: number, opts: Options) {
  const request = scenarios.find((s) => s.name === query)!.request(fx);
  const peak = rssPeak(pid);
  const cpuBefore = cpuSeconds(pid);
  const load = await autocannon(url, request, opts.seconds, opts.connections, ['--overallRate', String(rate)]);
  const cpu = cpuSeconds(pid) - cpuBefore;
  const maxRssBytes = peak.stop();
  // autocannon's own start and stop (a few hundred ms of an idle gateway) fall inside the CPU reading, not the seconds.
  const achievedRate = load.requests.total / load.duration;
  const cores = cpu / load.duration;
  const run: RateRun = {
    query,
    askedRate: rate,
    achievedRate,
    saturated: achievedRate < rate * 0.95,
    cores,
    coresPer1000: cores / (achievedRate / 1000),
    p50Ms: load.latency.p50,
    p99Ms: load.latency.p99,
    maxRssBytes,
    failed: load.non2xx + load.errors + load.timeouts,
  };
  console.log(
    `${query} at ${rate} req/s: ${achievedRate.toFixed(0)} achieved, ${cores.toFixed(3)} cores, ` +
      `${run.coresPer1000.toFixed(3)} cores per 1,000 req/s, p99 ${run.p99Ms} ms, max RSS ${mib(maxRssBytes)}` +
      `${run.failed ? `, ${run.failed} failed` : ''}${run.saturated ? ' (saturated)' : ''}`,
  );
  return run;
}

/** Idle after a short warm-up (each query at the lowest rate): RSS, and CPU over IDLE_SECONDS quiet seconds. */
async function idle(pid: number, url: string, fx: Fixtures, opts: Options) {
  for (const query of QUERIES) {
    const request = scenarios.find((s) => s.name === query)!.request(fx);
    const rate = String(Math.min(...opts.rates));
    await autocannon(url, request, opts.warmup, opts.connections, ['--overallRate', rate]);
  }
  const cpuBefore = cpuSeconds(pid);
  await sleep(IDLE_SECONDS * 1000);
  return { rssBytes: procRss(pid)!, cores: (cpuSeconds(pid) - cpuBefore) / IDLE_SECONDS };
}

// ---- deriving ----

/** The autoscaler's target, of the CPU request: 30 % left for a burst while the replicas it adds start. */
const HPA_UTILISATION = 0.7;
/** What one gateway process can use: its JavaScript runs on one core (WORKERS=1, the default). */
const PROCESS_CORES = 1;
/**
 * RSS per byte of the caches' documented bounds once they are full: `npm run memory` saw RSS grow by 147–157 MB as
 * DOCUMENT_CACHE_MAX_BYTES and COMPILED_EXECUTION_MAX_BYTES (80 MiB of estimated heap) filled
 * (docs/operations.md#memory).
 */
const CACHE_RSS_PER_BYTE = 2;
/** Over the sum of what was measured, for what was not (larger answers in flight, other queries' plans). */
const MEMORY_MARGIN = 0.1;

interface Figures {
  readonly idleRssBytes: number;
  readonly idleCores: number;
  readonly coresPer1000: Readonly<Record<(typeof QUERIES)[number], number>>;
  readonly loadRssBytes: number;
  readonly subscriptionBytesPer1000: number;
}

const ceilTo = (value: number, step: number) => Math.ceil(value / step) * step;
const mib = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`;

/** A query's CPU per 1,000 req/s: the median over its runs that were served in full (all of them if none was). */
function perQuery(runs: readonly RateRun[], query: string): number {
  const mine = runs.filter((run) => run.query === query);
  const clean = mine.filter((run) => !run.saturated && run.failed === 0);
  const values = (clean.length > 0 ? clean : mine).map((run) => run.coresPer1000).sort((a, b) => a - b);
  const middle = values.length / 2;
  return Number.isInteger(middle) ? (values[middle - 1]! + values[middle]!) / 2 : values[Math.floor(middle)]!;
}

/** The Kubernetes values, each from the figures by the arithmetic its comment says. */
function derive(f: Figures, config: Config, podRate: number | undefined) {
  const heavier = Math.max(...Object.values(f.coresPer1000));
  // By default a replica takes the rate at which its one process reaches the target of one core.
  const rate = podRate ?? Math.floor((HPA_UTILISATION * PROCESS_CORES * 1000) / heavier / 50) * 50;
  // The request is what the replica uses at that rate over the target: the autoscaler adds one there.
  const cpuRequestMillicores = ceilTo((heavier * rate) / HPA_UTILISATION, 50);
  const scaleOutAt = (cores: number) => Math.round((HPA_UTILISATION * cpuRequestMillicores) / cores);
  const cacheBytes = CACHE_RSS_PER_BYTE * (config.documentCache.maxBytes + config.compiledDocuments.maxBytes);
  const subscriptionsMax = config.subscriptions.max * config.workers;
  const subscriptionBytes = (subscriptionsMax * f.subscriptionBytesPer1000) / 1000;
  return {
    podRate: rate,
    cpuRequestMillicores,
    hpaUtilisationPercent: Math.round(HPA_UTILISATION * 100),
    scaleOutReqPerSec: { Q1: scaleOutAt(f.coresPer1000.Q1), Q2: scaleOutAt(f.coresPer1000.Q2) },
    cacheHeadroomBytes: cacheBytes,
    memoryRequestMi: ceilTo((f.idleRssBytes + cacheBytes) / MiB, 16),
    subscriptionsMax,
    subscriptionsBytes: subscriptionBytes,
    memoryLimitMi: ceilTo(((f.loadRssBytes + cacheBytes + subscriptionBytes) * (1 + MEMORY_MARGIN)) / MiB, 16),
  };
}
type Derived = ReturnType<typeof derive>;

const assumptions = (config: Config) => [
  `one process per replica (WORKERS=${config.workers}), which runs its JavaScript on ${PROCESS_CORES} core`,
  `the autoscaler aims at ${HPA_UTILISATION * 100} % of the CPU request: 30 % left for a burst while new replicas start`,
  'CPU scales with the rate (the runs at several rates show whether it does); traffic is priced as the heavier query',
  `the caches full: ${CACHE_RSS_PER_BYTE} × (DOCUMENT_CACHE_MAX_BYTES + COMPILED_EXECUTION_MAX_BYTES) of RSS; the response cache off or in Redis (else add ${CACHE_RSS_PER_BYTE} × RESPONSE_CACHE_MAX_BYTES)`,
  `the limit: the RSS under load, the caches full and SUBSCRIPTIONS_MAX (${config.subscriptions.max}) SSE subscriptions open at once, + ${MEMORY_MARGIN * 100} %`,
];

// ---- reporting ----

function printReport(f: Figures, runs: readonly RateRun[], derived: Derived, config: Config, opts: Options): void {
  const rates = opts.rates.join(', ');
  const rows: [string, string, string][] = [
    [
      'RSS idle',
      mib(f.idleRssBytes),
      `VmRSS ${IDLE_SECONDS} s after a warm-up (Q1, Q2 at ${Math.min(...opts.rates)} req/s)`,
    ],
    ['CPU idle', `${f.idleCores.toFixed(3)} cores`, `utime + stime over those ${IDLE_SECONDS} s`],
    ...QUERIES.map((query): [string, string, string] => [
      `CPU per 1,000 req/s, ${query}`,
      `${f.coresPer1000[query].toFixed(3)} cores`,
      `utime + stime over ${opts.seconds} s at ${rates} req/s (median of the runs served in full)`,
    ]),
    ['RSS under load', mib(f.loadRssBytes), `VmRSS every ${SAMPLE_MS} ms during those runs, the largest`],
    [
      'RSS per 1,000 open subscriptions',
      `${(f.subscriptionBytesPer1000 / MiB).toFixed(1)} MiB`,
      `VmRSS before and after opening ${opts.subscriptions} SSE subscriptions, 2 s each to settle`,
    ],
  ];
  console.log('\n| figure | value | how |\n|---|--:|---|');
  for (const [figure, value, how] of rows) console.log(`| ${figure} | ${value} | ${how} |`);
  console.log(
    '\n| query | asked req/s | achieved | cores | cores per 1,000 req/s | p50 ms | p99 ms | max RSS | failed |',
  );
  console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const r of runs)
    console.log(
      `| ${r.query} | ${r.askedRate} | ${r.achievedRate.toFixed(0)}${r.saturated ? ' (saturated)' : ''} | ${r.cores.toFixed(3)} | ${r.coresPer1000.toFixed(3)} | ${r.p50Ms} | ${r.p99Ms} | ${mib(r.maxRssBytes)} | ${r.failed} |`,
    );
  const heavier = Math.max(...Object.values(f.coresPer1000));
  console.log(`
Derived (per replica):
  CPU request      ${derived.cpuRequestMillicores}m = ${heavier.toFixed(3)} cores per 1,000 req/s × ${derived.podRate} req/s / ${derived.hpaUtilisationPercent} %
  HPA target       ${derived.hpaUtilisationPercent} % of the request: a replica is added at ${derived.scaleOutReqPerSec.Q1} req/s of Q1 or ${derived.scaleOutReqPerSec.Q2} of Q2 per replica
  memory request   ${derived.memoryRequestMi}Mi = RSS idle ${mib(f.idleRssBytes)} + caches ${mib(derived.cacheHeadroomBytes)}
  memory limit     ${derived.memoryLimitMi}Mi = (RSS under load ${mib(f.loadRssBytes)} + caches ${mib(derived.cacheHeadroomBytes)} + ${derived.subscriptionsMax} subscriptions ${mib(derived.subscriptionsBytes)}) × ${1 + MEMORY_MARGIN}
Assumptions:
${assumptions(config)
  .map((line) => `  - ${line}`)
  .join('\n')}`);
}

// ---- main ----

async function main(): Promise<void> {
  const opts = options();
  const config = loadConfig();
  const startedAt = new Date().toISOString();
  console.log('Building (npm run build), as npm start does…');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit', timeout: 180_000 });
  const upstream = await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], 1, {
    PORT: '0',
    HOST,
    RECORD: '0',
  });
  const fx = await fixtures(upstream.url);
  const gatewayArgs = [...startFlags(), 'dist/main.js'];
  // Every call made: the load repeats one query with one token, whose concurrent reads would otherwise share upstream
  // calls (UPSTREAM_DEDUPE) as many callers' distinct reads do not. UPSTREAM_DEDUPE=true in the environment measures
  // that.
  const dedupe = process.env.UPSTREAM_DEDUPE ?? 'false';
  const env = {
    PORT: '0',
    HOST,
    UPSTREAM_URL: upstream.url,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
    UPSTREAM_DEDUPE: dedupe,
  };
  const gateway = await startServer('gateway', gatewayArgs, 0, env);
  const pid = gateway.child.process.pid!;
  if (!pinning) console.log('Note: not pinned (no taskset or one CPU): the load shares the CPUs with the gateway.');
  const quiet = await idle(pid, gateway.url, fx, opts);
  const runs: RateRun[] = [];
  for (const query of QUERIES)
    for (const rate of opts.rates) runs.push(await atRate(pid, gateway.url, fx, query, rate, opts));
  await stop(gateway.child.process);
  console.log(`${opts.subscriptions} SSE subscriptions on a fresh gateway…`);
  const subscriptions = await memoryPer('gateway', upstream.url, 'sse', fx.headId, opts.subscriptions);
  const figures: Figures = {
    idleRssBytes: quiet.rssBytes,
    idleCores: quiet.cores,
    coresPer1000: { Q1: perQuery(runs, 'Q1'), Q2: perQuery(runs, 'Q2') },
    loadRssBytes: Math.max(...runs.map((run) => run.maxRssBytes)),
    subscriptionBytesPer1000: subscriptions.bytes * 1000,
  };
  const derived = derive(figures, config, opts.podRate);
  printReport(figures, runs, derived, config, opts);
  const meta = {
    startedAt,
    node: process.version,
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    cpus: availableParallelism(),
    pinning: pinning ? 'taskset: gateway on CPU 0, upstream + autocannon on CPU 1' : 'not pinned',
    gatewayCommand: `UPSTREAM_DEDUPE=${dedupe} node ${gatewayArgs.join(' ')}`,
    options: opts,
  };
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  const file = join(root, `bench/results/sizing-${startedAt.replace(/[:.]/g, '-')}.json`);
  const report = { meta, figures, runs, derived, assumptions: assumptions(config) };
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nWritten: ${file.slice(root.length)}`);
}

await runBench(main, usage);
