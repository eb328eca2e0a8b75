import { execFileSync } from 'node:child_process';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { exitWithHelp, integerOption, runBench, UsageError } from './cli.js';
import { procRss } from './proc.js';
import { autocannon, fixtures, HOST, http, pinning, root, startFlags, startServer, stop } from './processes.js';
import {
  type AllCores,
  type BenchReport,
  legend,
  type Measurement,
  type ScenarioResult,
  summarize,
  toMarkdown,
  writeReports,
} from './report.js';
import { type Fixtures, type HttpRequest, type Scenario, scenarios } from './scenarios.js';

/*
 * `npm run bench`: starts the reference upstream (RECORD=0) and the gateway as separate processes,
 * then drives each scenario with autocannon in a third process: warm-up, reset the upstream's
 * counters, measured phase, read the counters and the gateway's RSS. Everything on 127.0.0.1.
 * Then, with --cores all or both, the same against a second gateway with a worker per CPU.
 */

const usage = `Usage: npm run bench -- [--duration 10] [--warmup 3] [--rounds 1] [--connections 16] [--workers N] [--cores both] [--only Q1,Q3] [--env NAME=VALUE]... [--tsx]
  --only     scenarios to run (${scenarios.map((s) => s.name).join(', ')}); direct always runs, it is the baseline of the ratio
  --cores    one: the gateway pinned to CPU 0 for --rounds rounds; all: one round against a gateway with
             WORKERS=auto (a worker per CPU, not pinned; the upstream and autocannon stay on CPU 1);
             both (the default): one, then all
  --workers  passed to the one-core gateway as WORKERS=N
  --env      a variable of the gateway's environment, e.g. --env RESPONSE_CACHE_TTL_MS=60000 (Q1 then
             measures cache hits); repeat it for several
  The gateway runs with the node flags of package.json's start script (as npm start runs it);
  GATEWAY_NODE_FLAGS (env) adds to them (later flags win), e.g. "--max-semi-space-size=16"
  --tsx      run the gateway from source with node --import tsx src/main.ts instead of the compiled
             build (npm run build + node dist/main.js, as npm start does); tsx adds ~40 MB RSS`;

function options() {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '1' },
      connections: { type: 'string', default: '16' },
      workers: { type: 'string' },
      cores: { type: 'string', default: 'both' },
      only: { type: 'string' },
      env: { type: 'string', multiple: true },
      tsx: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h' },
    },
  });
  exitWithHelp(values.help, usage);
  const cores = (['one', 'all', 'both'] as const).find((choice) => choice === values.cores);
  if (cores === undefined)
    throw new UsageError(`--cores: expected one, all or both, got ${JSON.stringify(values.cores)}`);
  const only = values.only
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = only?.filter((name) => !scenarios.some((s) => s.name.toLowerCase() === name.toLowerCase()));
  if (unknown?.length)
    throw new UsageError(
      `--only: unknown scenario(s) ${unknown.join(', ')}; known: ${scenarios.map((s) => s.name).join(', ')}`,
    );
  return {
    durationSec: integerOption('duration', values.duration, 1, 600),
    warmupSec: integerOption('warmup', values.warmup, 0, 120),
    rounds: integerOption('rounds', values.rounds, 1, 50),
    connections: integerOption('connections', values.connections, 1, 1_000),
    compiled: !values.tsx,
    workers: values.workers === undefined ? undefined : integerOption('workers', values.workers, 1, 64),
    env: Object.fromEntries(
      (values.env ?? []).map((pair) => {
        const match = /^([A-Z][A-Z0-9_]*)=(.*)$/s.exec(pair);
        if (match === null) throw new UsageError(`--env: expected NAME=VALUE, got ${JSON.stringify(pair)}`);
        return [match[1]!, match[2]!];
      }),
    ),
    cores,
    selected: scenarios.filter(
      (s) =>
        s.name === 'direct' || only === undefined || only.some((name) => name.toLowerCase() === s.name.toLowerCase()),
    ),
  };
}

/** One request before the load: 'ok', or what is wrong with it. */
async function check(url: string, request: HttpRequest): Promise<string> {
  const { status, text } = await http(url, {
    method: request.method,
    headers: request.headers,
    ...(request.body === undefined ? {} : { body: request.body }),
  });
  if (status < 200 || status > 299) return `HTTP ${status}: ${text.slice(0, 200)}`;
  if (request.target === 'upstream') return 'ok';
  const body = JSON.parse(text) as { data?: unknown; errors?: { message: string }[] };
  if (body.errors !== undefined)
    return `errors: ${body.errors
      .map((e) => e.message)
      .join('; ')
      .slice(0, 200)}`;
  return body.data === undefined || body.data === null ? 'no data' : 'ok';
}

// ---- gateway memory ----

/** The fallback: process_resident_memory_bytes from the gateway's /metrics, when it serves it. */
async function metricsRss(gatewayUrl: string): Promise<number | undefined> {
  try {
    const { status, text } = await http(new URL('/metrics', gatewayUrl).href);
    const value = status === 200 ? /^process_resident_memory_bytes (\S+)$/m.exec(text)?.[1] : undefined;
    return value === undefined ? undefined : Number(value);
  } catch {
    return undefined;
  }
}

/**
 * How to read a gateway's RSS: /proc with its workers, else /metrics (of the process that answers: one worker behind
 * WORKERS>1).
 */
async function rssReader(
  pid: number,
  url: string,
): Promise<{ source: string; read: () => Promise<number | undefined> }> {
  if (procRss(pid) !== undefined) return { source: '/proc/<pid>/status VmRSS', read: async () => procRss(pid) };
  if ((await metricsRss(url)) !== undefined) return { source: '/metrics', read: () => metricsRss(url) };
  return { source: 'unavailable', read: async () => undefined };
}

// ---- main ----

async function main(): Promise<void> {
  const opts = options();
  const startedAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const oneCore = opts.cores !== 'all';
  const allCores = opts.cores !== 'one';
  if (pinning && oneCore && (opts.workers ?? 1) > 1)
    console.log(
      'Note: the one-core gateway is pinned to CPU 0, so its workers share that one core (taskset is inherited by cluster forks).',
    );
  if (!pinning)
    console.log(
      'Note: /usr/bin/taskset or a second CPU is missing: processes are not pinned, results vary more between runs.',
    );

  const upstream = await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], 1, {
    PORT: '0',
    HOST,
    RECORD: '0',
  });
  const upstreamUrl = upstream.url;
  const admin = new URL('/__reference/', upstreamUrl).href;
  const fx = await fixtures(upstreamUrl);
  // NODE_ENV=production as deployed (graphql-js skips development-only checks).
  const gatewayEnv: Record<string, string> = {
    PORT: '0',
    HOST,
    UPSTREAM_URL: upstreamUrl,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
  };
  if (opts.workers !== undefined) gatewayEnv.WORKERS = String(opts.workers);
  Object.assign(gatewayEnv, opts.env);
  if (opts.compiled)
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit', timeout: 180_000 });
  const nodeFlags = [...startFlags(), ...(process.env.GATEWAY_NODE_FLAGS?.split(' ').filter(Boolean) ?? [])];
  const gatewayArgs = opts.compiled ? [...nodeFlags, 'dist/main.js'] : [...nodeFlags, '--import', 'tsx', 'src/main.ts'];
  const startGateway = async (name: string, cpu: number | undefined, env: Record<string, string>) => {
    const { child, url } = await startServer(name, gatewayArgs, cpu, env);
    return { child, url, ...(await rssReader(child.process.pid!, url)) };
  };
  type Gateway = Awaited<ReturnType<typeof startGateway>>;

  /** Checks one response per scenario against `gateway`, then measures every scenario `rounds` times. */
  const runPhase = async (phase: string, gateway: Gateway, rounds: number) => {
    const results: ScenarioResult[] = [];
    for (const scenario of opts.selected) {
      const request = scenario.request(fx);
      const url = request.target === 'upstream' ? `${upstreamUrl}${request.path}` : gateway.url;
      results.push({
        name: scenario.name,
        description: scenario.description,
        check: await check(url, request),
        rounds: [],
      });
    }
    for (const bad of results.filter((r) => r.check !== 'ok'))
      console.warn(`Warning: ${phase} ${bad.name} does not answer cleanly (${bad.check}); its row measures that.`);
    const rssAfterRound: (number | undefined)[] = [];
    for (let round = 1; round <= rounds; round++) {
      for (const [i, scenario] of opts.selected.entries()) {
        const measurement = await measure(scenario, fx, upstreamUrl, gateway.url, admin, opts, gateway.read);
        results[i]!.rounds.push(measurement);
        const direct = results[0]!.rounds[round - 1]?.reqPerSec;
        measurement.ratio = direct ? measurement.reqPerSec / direct : undefined;
        console.log(
          `${phase} ${rounds > 1 ? `round ${round} ` : ''}${scenario.name.padEnd(6)} ${measurement.reqPerSec.toFixed(0).padStart(6)} req/s  p50 ${measurement.p50Ms} ms  p99 ${measurement.p99Ms} ms  ` +
            `${measurement.callsPerOp.toFixed(2)} calls/op  ${measurement.non2xx} non-2xx  ${measurement.errors} errors`,
        );
      }
      rssAfterRound.push(await gateway.read());
    }
    return { results, rssAfterRound };
  };

  const rounds = (oneCore ? opts.rounds : 0) + (allCores ? 1 : 0);
  const phases = [
    ...(oneCore ? [`${opts.rounds} round(s) on one core`] : []),
    ...(allCores ? ['1 round on all cores'] : []),
  ];
  console.log(
    `${opts.selected.length} scenario(s) × ${phases.join(' + ')}, about ${Math.ceil((opts.selected.length * rounds * (opts.warmupSec + opts.durationSec + 1)) / 60)} min`,
  );

  let one: { gateway: Gateway; results: ScenarioResult[]; rssAfterRound: (number | undefined)[] } | undefined;
  if (oneCore) {
    const gateway = await startGateway('one-core gateway', 0, gatewayEnv);
    console.log(
      `Upstream ${upstreamUrl} · gateway ${gateway.url}${pinning ? ' · gateway on CPU 0, upstream and autocannon on CPU 1' : ''}`,
    );
    one = { gateway, ...(await runPhase('one-core', gateway, opts.rounds)) };
    // Before the all-cores gateway starts: the two must not share the CPUs.
    await stop(gateway.child.process);
  }

  let all: { gateway: Gateway; section: AllCores } | undefined;
  if (allCores) {
    // What WORKERS=auto resolves to in the gateway, which sees the same CPUs as this process.
    const workers = availableParallelism();
    const gateway = await startGateway('all-cores gateway', undefined, { ...gatewayEnv, WORKERS: 'auto' });
    console.log(
      `Upstream ${upstreamUrl} · gateway ${gateway.url} · ${workers} workers, not pinned${pinning ? '; upstream and autocannon still on CPU 1' : ''}`,
    );
    const { results, rssAfterRound } = await runPhase('all-cores', gateway, 1);
    const section: AllCores = {
      workers,
      pinning: pinning
        ? 'gateway not pinned, upstream + autocannon still on CPU 1: the workers share that CPU with them (on a 2-core machine, one of its two cores), so these figures are a lower bound'
        : 'not pinned (no taskset or one CPU): the workers share the CPUs with the upstream and autocannon, so these figures are a lower bound',
      scenarios: results,
      rssAfterRun: rssAfterRound[0],
      gatewayLogLines: gateway.child.lines,
      gatewayLogSamples: gateway.child.samples,
    };
    all = { gateway, section };
    await stop(gateway.child.process);
  }

  const report: BenchReport = {
    meta: {
      startedAt,
      finishedAt: new Date().toISOString(),
      git: gitDescription(),
      node: process.version,
      cpu: cpus()[0]?.model.trim() ?? 'unknown',
      cpus: availableParallelism(),
      pinning: !pinning
        ? 'not pinned (no taskset or one CPU)'
        : oneCore
          ? 'taskset: gateway on CPU 0, upstream + autocannon on CPU 1'
          : 'taskset: upstream + autocannon on CPU 1',
      cores: opts.cores,
      connections: opts.connections,
      warmupSec: opts.warmupSec,
      durationSec: opts.durationSec,
      rounds: opts.rounds,
      workers: opts.workers,
      gatewayCommand: `node ${gatewayArgs.join(' ')}`,
      gatewayEnv: Object.fromEntries(Object.entries(gatewayEnv).filter(([name]) => name !== 'UPSTREAM_URL')),
      // --cores runs at least one of the two phases.
      rssSource: (one ?? all)!.gateway.source,
      gatewayLogLines: one?.gateway.child.lines ?? 0,
      gatewayLogSamples: one?.gateway.child.samples ?? [],
    },
    scenarios: one?.results ?? [],
    rss: { afterRound1: one?.rssAfterRound[0], afterLastRound: one?.rssAfterRound[one.rssAfterRound.length - 1] },
    ...(all === undefined ? {} : { allCores: all.section }),
  };
  summarize(report.scenarios);
  if (report.allCores) summarize(report.allCores.scenarios);
  const written = writeReports(report, join(root, 'bench/results'));
  console.log(
    `\n${toMarkdown(report)}\n${legend}\n\nWritten: ${written.map((p) => p.slice(root.length)).join(', ')} (and latest.*)`,
  );
}

async function measure(
  scenario: Scenario,
  fx: Fixtures,
  upstreamUrl: string,
  gatewayUrl: string,
  admin: string,
  opts: { warmupSec: number; durationSec: number; connections: number },
  rss: () => Promise<number | undefined>,
): Promise<Measurement> {
  const request = scenario.request(fx);
  const url = request.target === 'upstream' ? `${upstreamUrl}${request.path}` : gatewayUrl;
  if (opts.warmupSec > 0) await autocannon(url, request, opts.warmupSec, opts.connections);
  const reset = await http(`${admin}reset`, { method: 'POST' });
  if (reset.status !== 204) throw new Error(`upstream reset: HTTP ${reset.status}`);
  const load = await autocannon(url, request, opts.durationSec, opts.connections);
  const stats = JSON.parse((await http(`${admin}stats`)).text) as { counts: Record<string, number>; total: number };
  return {
    reqPerSec: load.requests.average,
    p50Ms: load.latency.p50,
    p99Ms: load.latency.p99,
    requests: load.requests.total,
    non2xx: load.non2xx,
    errors: load.errors + load.timeouts,
    callsPerOp: load.requests.sent > 0 ? stats.total / load.requests.sent : 0,
    upstreamCalls: Object.fromEntries(Object.entries(stats.counts).filter(([, n]) => n > 0)),
    rssBytes: await rss(),
    ratio: undefined,
  };
}

function gitDescription(): string {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: root, encoding: 'utf8' }).trim() !== '';
    return dirty ? `${commit} + uncommitted src changes` : commit;
  } catch {
    return 'unknown';
  }
}

await runBench(main, usage);
