import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { exitWithHelp, integerOption, runBench } from './cli.js';
import type { LoadResult, LoadTask } from './overload-load.js';
import { fixtures, HOST, http, resultOfChild, startFlags, startServer, stop } from './processes.js';
import { scenarios } from './scenarios.js';

/*
 * `npm run bench:overload`: load shedding (docs/operations.md#load-shedding) under twice the sustainable load. The
 * reference upstream answers every read after `--latency` ms; the gateway (built, pinned to CPU 0, UPSTREAM_CONNECTIONS
 * as configured) is driven with Q1 by autocannon (bench/overload-load.ts, pinned to CPU 1 with the upstream). First the
 * sustainable load: the connections at which throughput stops growing, shedding off. Then 1x and 2x that, shedding off
 * (SHED_MAX_IN_FLIGHT=0 SHED_EVENT_LOOP_DELAY_MS=0 SHED_MAX_UPSTREAM_QUEUED=0) and on (the defaults): the p99 of the
 * accepted (2xx) answers, the refusals (503), throughput.
 */

const usage = `Usage: npm run bench:overload -- [--latency 1000] [--seconds 10] [--steps 25,50,75,100,125,150,200]
  --latency  ms the reference upstream takes for every read
  --seconds  measured seconds per run
  --steps    connections tried to find the sustainable load (throughput saturated)`;

function options() {
  const { values } = parseArgs({
    options: {
      latency: { type: 'string', default: '1000' },
      seconds: { type: 'string', default: '10' },
      steps: { type: 'string', default: '25,50,75,100,125,150,200' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  exitWithHelp(values.help, usage);
  return {
    latencyMs: integerOption('latency', values.latency, 1, 60_000),
    seconds: integerOption('seconds', values.seconds, 2, 600),
    steps: values.steps.split(',').map((step) => integerOption('steps', step.trim(), 1, 5_000)),
  };
}

const READS = ['listHeads', 'getHeadExt', 'listHeadsExt', 'getHeadById', 'getHeadExtById'];

/** Runs one load in its own process, pinned to CPU 1. */
const load = (task: LoadTask): Promise<LoadResult> =>
  resultOfChild('load', ['--import', 'tsx', 'bench/overload-load.ts'], { OVERLOAD_TASK: JSON.stringify(task) });

interface Row {
  readonly mode: string;
  readonly load: string;
  readonly connections: number;
  readonly result: LoadResult;
}

const perSecond = (count: number, seconds: number) => (count / seconds).toFixed(0);

async function main(): Promise<void> {
  const opts = options();
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit', timeout: 180_000 });
  const upstream = await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], 1, {
    PORT: '0',
    HOST,
    RECORD: '0',
  });
  const fx = await fixtures(upstream.url);
  for (const operation of READS) {
    const fault = await http(new URL('/__reference/faults', upstream.url).href, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ operation, fault: { kind: 'latency', ms: opts.latencyMs }, times: 1_000_000_000 }),
    });
    if (fault.status !== 204) throw new Error(`latency fault on ${operation}: HTTP ${fault.status} ${fault.text}`);
  }
  const request = scenarios.find((s) => s.name === 'Q1')!.request(fx);
  const gatewayArgs = [...startFlags(), 'dist/main.js'];
  // Every connection asks for the same head: with shared calls (UPSTREAM_DEDUPE) they would make one
  // upstream call a second between them, and the pool would never fill. Off, each operation holds a
  // connection of the pool, as distinct reads do.
  const base = {
    PORT: '0',
    HOST,
    UPSTREAM_URL: upstream.url,
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
    UPSTREAM_DEDUPE: 'false',
  };
  const modes = [
    {
      mode: 'shedding off',
      env: { ...base, SHED_MAX_IN_FLIGHT: '0', SHED_EVENT_LOOP_DELAY_MS: '0', SHED_MAX_UPSTREAM_QUEUED: '0' },
    },
    { mode: 'shedding on (defaults)', env: base },
  ];

  const run = async (url: string, connections: number, seconds: number) => {
    const result = await load({ url, body: request.body!, headers: request.headers, connections, seconds });
    // The answers still held at the upstream come back before the next run starts.
    await sleep(opts.latencyMs * 2);
    return result;
  };

  // The sustainable load: throughput stops growing with more connections (shedding off).
  const off = await startServer('gateway (shedding off)', gatewayArgs, 0, modes[0]!.env);
  await run(off.url, opts.steps[0]!, 2);
  const search: { connections: number; perSecond: number }[] = [];
  for (const connections of opts.steps) {
    const result = await run(off.url, connections, opts.seconds);
    search.push({ connections, perSecond: result.accepted / result.seconds });
    console.log(
      `search: ${connections} connections: ${(result.accepted / result.seconds).toFixed(0)} answers/s, p99 ${result.acceptedP99Ms.toFixed(0)} ms`,
    );
  }
  await stop(off.child.process);
  const best = Math.max(...search.map((s) => s.perSecond));
  const sustainable = search.find((s) => s.perSecond >= 0.95 * best)!.connections;
  console.log(
    `sustainable load: ${sustainable} connections (throughput within 5 % of the most seen, ${best.toFixed(0)}/s)`,
  );

  const rows: Row[] = [];
  for (const { mode, env } of modes) {
    const gateway = await startServer(`gateway (${mode})`, gatewayArgs, 0, env);
    await run(gateway.url, sustainable, 2);
    for (const [name, connections] of [
      ['1x', sustainable],
      ['2x', 2 * sustainable],
    ] as const) {
      const result = await run(gateway.url, connections, opts.seconds);
      rows.push({ mode, load: name, connections, result });
      console.log(
        `${mode} ${name} (${connections} connections): ${perSecond(result.accepted, result.seconds)} accepted/s, p50 ${result.acceptedP50Ms.toFixed(0)} ms, p99 ${result.acceptedP99Ms.toFixed(0)} ms, ${result.refused} refused, ${result.failed} failed`,
      );
    }
    await stop(gateway.child.process);
  }
  await stop(upstream.child.process);

  console.log(
    `\nUpstream ${opts.latencyMs} ms per read; gateway UPSTREAM_CONNECTIONS=${process.env.UPSTREAM_CONNECTIONS ?? 'default'}; ${opts.seconds} s per run; Q1.\n`,
  );
  console.log(
    '| shedding | load | connections | accepted/s | accepted p50 ms | accepted p99 ms | refused (503) /s | other failures |',
  );
  console.log('|---|---|---:|---:|---:|---:|---:|---:|');
  for (const { mode, load: name, connections, result } of rows) {
    console.log(
      `| ${mode} | ${name} | ${connections} | ${perSecond(result.accepted, result.seconds)} | ${result.acceptedP50Ms.toFixed(0)} | ${result.acceptedP99Ms.toFixed(0)} | ${perSecond(result.refused, result.seconds)} | ${result.failed} |`,
    );
  }
}

await runBench(main, usage);
