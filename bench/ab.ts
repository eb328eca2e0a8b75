import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { combinePasses, compareRounds, describeComparison, type OrderedComparison } from './ab-report.js';
import type { WorkerResult, WorkerTask } from './ab-worker.js';
import { exitWithHelp, integerOption, runBench, UsageError } from './cli.js';
import {
  builtModule,
  children,
  fixtures,
  HOST,
  pinning,
  root,
  spawnNode,
  startFlags,
  startServer,
} from './processes.js';
import { type Scenario, scenarios } from './scenarios.js';

/*
 * `npm run bench:ab -- <checkout A> <checkout B>`: what a change costs or saves per operation,
 * measured in place. Whole-process benches (the peer bench, `npm run bench`) move by 5–10 %
 * between runs on a shared VM; this puts both builds in one process (bench/ab-worker.ts) and
 * measures them in turns, so the machine's drift hits both alike and a difference of a few µs
 * an operation shows. It does it twice, each build loaded first once, and averages: the build
 * loaded second runs a few µs faster for the same code. The reference upstream runs on CPU 1.
 * Over HTTP (the default) it sees the whole path as served, the HTTP server and compression
 * included; with `--transport fetch` requests go through `app.fetch`, without the server.
 */

const usage = `Usage: npm run bench:ab -- <checkout A> <checkout B> [--only Q1 | --query <document>] [--rounds 30] [--ops 2000] [--connections 16] [--transport http]
  Each checkout needs a node_modules and a build; when the dependencies are the same, give both
  the same node_modules (two copies of every package in one process run slower and less evenly):
    git worktree add ../gw-before HEAD~1 && ln -s "$PWD/node_modules" ../gw-before/ && (cd ../gw-before && npm run build)
  --only         the scenario (${scenarios
    .filter((s) => s.name !== 'direct')
    .map((s) => s.name)
    .join(', ')})
  --query        a GraphQL document to send instead, e.g. '{ heads(first: 50) { nodes { url hair { url } } } }'
  --rounds       paired rounds per pass (two passes: A loaded first, then B)
  --ops          operations per build per round
  --connections  operations in flight at once
  --transport    http (each build on its own HTTP server on a loopback port, as main.ts serves it) or fetch (app.fetch, no sockets)`;

function options() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      only: { type: 'string', default: 'Q1' },
      query: { type: 'string' },
      rounds: { type: 'string', default: '30' },
      ops: { type: 'string', default: '2000' },
      connections: { type: 'string', default: '16' },
      transport: { type: 'string', default: 'http' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  exitWithHelp(values.help, usage);
  if (positionals.length !== 2) throw new UsageError('two checkouts to compare, A and B');
  const checkouts = positionals.map((path) => resolve(path)) as [string, string];
  for (const checkout of checkouts) {
    if (!existsSync(builtModule(checkout, 'gateway.js')))
      throw new UsageError(`${checkout}: no built gateway in dist/ (run npm run build there)`);
    if (!existsSync(join(checkout, 'node_modules')))
      throw new UsageError(`${checkout}: no node_modules (run npm ci there)`);
  }
  const query = values.query;
  const scenario: Scenario | undefined =
    query === undefined
      ? scenarios.find((s) => s.name !== 'direct' && s.name.toLowerCase() === values.only.toLowerCase())
      : {
          name: 'the --query document',
          description: query,
          request: () => ({
            target: 'gateway',
            method: 'POST',
            path: '',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ query }),
          }),
        };
  if (scenario === undefined) throw new UsageError(`--only: unknown scenario ${JSON.stringify(values.only)}`);
  const transport = values.transport as WorkerTask['transport'];
  if (transport !== 'http' && transport !== 'fetch')
    throw new UsageError(`--transport: http or fetch, not ${JSON.stringify(values.transport)}`);
  return {
    checkouts,
    scenario,
    transport,
    rounds: integerOption('rounds', values.rounds, 2, 1_000),
    ops: integerOption('ops', values.ops, 100, 1_000_000),
    concurrency: integerOption('connections', values.connections, 1, 1_000),
  };
}

/**
 * One pass in a worker pinned to CPU 0. Its stdout (the gateways' log lines, at the default
 * level as deployed) goes down a pipe to `cat` on CPU 1, as a log reader would take it.
 */
function pass(task: WorkerTask, upstreamUrl: string): Promise<WorkerResult> {
  const drain = pinning
    ? spawn('/usr/bin/taskset', ['-c', '1', 'cat'], { stdio: ['pipe', 'ignore', 'inherit'] })
    : undefined;
  const env = { AB_TASK: JSON.stringify(task), UPSTREAM_URL: upstreamUrl, NODE_ENV: 'production' };
  const worker = spawnNode([...startFlags(), '--import', 'tsx', join(root, 'bench/ab-worker.ts')], 0, env, [
    'ignore',
    drain?.stdin ?? 'ignore',
    'inherit',
    'ipc',
  ]);
  // The worker holds the pipe now: `cat` ends when it does.
  drain?.stdin?.destroy();
  const tracked = { name: 'A/B worker', process: worker, lines: 0, samples: [], tail: [] };
  children.add(tracked);
  worker.once('exit', () => children.delete(tracked));
  return new Promise((resolvePass, reject) => {
    drain?.once('error', reject);
    worker.once('error', reject);
    worker.once('message', (message: WorkerResult | { error: string }) =>
      'error' in message ? reject(new Error(message.error)) : resolvePass(message),
    );
    worker.once('exit', (code, signal) =>
      reject(new Error(`the A/B worker exited (${signal ?? code}) without a result`)),
    );
  });
}

async function main(): Promise<void> {
  const opts = options();
  const [a, b] = opts.checkouts;
  if (realpathSync(join(a, 'node_modules')) !== realpathSync(join(b, 'node_modules'))) {
    console.log(
      'Note: each checkout has a node_modules of its own, so the worker loads two copies of every package; the passes vary more (see --help).',
    );
  }
  if (!pinning)
    console.log('Note: /usr/bin/taskset or a second CPU is missing: the worker shares its CPU with the upstream.');
  const upstream = await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], 1, {
    PORT: '0',
    HOST,
    RECORD: '0',
  });
  const request = opts.scenario.request(await fixtures(upstream.url));
  const task = (builds: [string, string]): WorkerTask => ({
    builds,
    request: { headers: request.headers, body: request.body ?? '' },
    rounds: opts.rounds,
    ops: opts.ops,
    concurrency: opts.concurrency,
    transport: opts.transport,
  });
  console.log(
    `${opts.scenario.name}: ${opts.rounds} rounds × ${opts.ops} operations per build, ${opts.concurrency} at a time over ${opts.transport}, each build loaded first once`,
  );
  const passes: OrderedComparison[] = [];
  for (const aFirst of [true, false]) {
    const { perOperation } = await pass(task(aFirst ? [a, b] : [b, a]), upstream.url);
    const [forA, forB] = aFirst ? perOperation : [perOperation[1], perOperation[0]];
    passes.push(compareRounds(forA, forB));
  }
  const comparison = combinePasses(passes[0]!, passes[1]!);
  console.log(describeComparison({ a, b }, opts.scenario.name, comparison).join('\n'));
  const dir = join(root, 'bench/results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `ab-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(
    file,
    `${JSON.stringify({ a, b, scenario: opts.scenario.name, rounds: opts.rounds, ops: opts.ops, connections: opts.concurrency, node: process.version, ...comparison }, null, 2)}\n`,
  );
  console.log(`Written: ${file.slice(root.length)}`);
}

await runBench(main, usage);
