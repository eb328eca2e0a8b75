import { pathToFileURL } from 'node:url';
import { builtModule } from './processes.js';

/*
 * One pass of `npm run bench:ab` (bench/ab.ts starts it pinned to CPU 0, with `npm start`'s node
 * flags): loads two builds of the gateway into this process, in the order given, and drives them
 * in turns through `app.fetch` (no sockets: what is measured is the gateway's own work on a
 * request, its upstream calls included). Each round measures this process's CPU time over `ops`
 * operations of one build, then of the other (which goes first alternates), and the CPU µs per
 * operation of every round goes back to the parent over IPC.
 */

export interface WorkerTask {
  /** Checkouts with a build (`dist/`), in the order they are loaded. */
  readonly builds: readonly [string, string];
  readonly request: { readonly headers: Readonly<Record<string, string>>; readonly body: string };
  readonly rounds: number;
  readonly ops: number;
  readonly concurrency: number;
}

export interface WorkerResult {
  /** CPU µs per operation, one entry per round, in the order of `builds`. */
  readonly perOperation: readonly [number[], number[]];
}

interface BuiltGateway {
  app: { fetch(url: string, init: RequestInit): Promise<Response> };
  upstream: { close(): Promise<void> };
}

/** A build's gateway as `main.ts` makes it, from the environment (UPSTREAM_URL, NODE_ENV, LOG_LEVEL). */
async function load(checkout: string): Promise<BuiltGateway> {
  // Server modules sit in dist/server/ by concern since issue 32, in dist/server/ since the layers (issue 24), in dist/ before (builtModule).
  const module = (file: string) => import(pathToFileURL(builtModule(checkout, file)).href);
  const [{ loadConfig }, { buildGateway }, { createLogger }, { GatewayMetrics }] = await Promise.all([module('config.js'), module('gateway.js'), module('logger.js'), module('metrics.js')]);
  const config = loadConfig();
  return buildGateway(config, config.upstreamUrl, { logger: createLogger({ level: config.logLevel }), metrics: new GatewayMetrics({ clusterWorker: false }) });
}

async function main(task: WorkerTask): Promise<WorkerResult> {
  const gateways: BuiltGateway[] = [];
  for (const build of task.builds) gateways.push(await load(build));
  const operation = (gateway: BuiltGateway) => async () => {
    const response = await gateway.app.fetch('http://gateway/graphql', { method: 'POST', headers: task.request.headers, body: task.request.body });
    const text = await response.text();
    if (response.status !== 200 || text.includes('"errors"')) throw new Error(`HTTP ${response.status}: ${text.slice(0, 300)}`);
  };
  const run = async (one: () => Promise<void>, ops: number) => {
    let started = 0;
    await Promise.all(Array.from({ length: task.concurrency }, async () => {
      while (started++ < ops) await one();
    }));
  };
  const cpuPerOperation = async (one: () => Promise<void>) => {
    const before = process.cpuUsage();
    await run(one, task.ops);
    const used = process.cpuUsage(before);
    return (used.user + used.system) / task.ops;
  };
  const operations = gateways.map(operation);
  // Warm both (JIT, caches, the upstream pool) before anything is measured.
  for (const one of operations) await run(one, 5 * task.ops);
  const perOperation: [number[], number[]] = [[], []];
  for (let round = 0; round < task.rounds; round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    for (const i of order) perOperation[i]!.push(await cpuPerOperation(operations[i]!));
  }
  await Promise.all(gateways.map((gateway) => gateway.upstream.close()));
  return { perOperation };
}

const task = JSON.parse(process.env.AB_TASK ?? 'null') as WorkerTask | null;
if (task === null || process.send === undefined) throw new Error('bench/ab-worker.ts is started by bench/ab.ts');
try {
  process.send(await main(task), () => process.exit(0));
} catch (error) {
  process.send({ error: error instanceof Error ? error.message : String(error) }, () => process.exit(1));
}
