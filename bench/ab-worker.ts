import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { builtModule } from './processes.js';

/*
 * One pass of `npm run bench:ab` (bench/ab.ts starts it pinned to CPU 0, with `npm start`'s node
 * flags): loads two builds of the gateway into this process, in the order given, and drives them
 * in turns, over HTTP (`--transport http`: each build served by its own HTTP server on a loopback
 * port, as `main.ts` serves it, and asked by an undici pool in this process, whose own work is the
 * same for both) or through `app.fetch` (`--transport fetch`: no sockets). What is measured is
 * the gateway's own work on a request, its upstream calls included. Each round measures this
 * process's CPU time over `ops` operations of one build, then of the other (which goes first
 * alternates), and the CPU µs per operation of every round goes back to the parent over IPC.
 */

export interface WorkerTask {
  /** Checkouts with a build (`dist/`), in the order they are loaded. */
  readonly builds: readonly [string, string];
  readonly request: { readonly headers: Readonly<Record<string, string>>; readonly body: string };
  readonly rounds: number;
  readonly ops: number;
  readonly concurrency: number;
  /** How each build is driven: over HTTP (its server on a loopback port), or through `app.fetch`. */
  readonly transport: 'http' | 'fetch';
}

export interface WorkerResult {
  /** CPU µs per operation, one entry per round, in the order of `builds`. */
  readonly perOperation: readonly [number[], number[]];
}

interface BuiltGateway {
  app: { fetch(url: string, init: RequestInit): Promise<Response> };
  upstream: { close(): Promise<void> };
  /** The build on its HTTP server, with `--transport http`. */
  http?: { readonly server: Server; readonly pool: Pool };
}

/**
 * A build's gateway as `main.ts` makes it, from the environment (UPSTREAM_URL, NODE_ENV, LOG_LEVEL), on its own HTTP
 * server with `--transport http`.
 */
async function load(checkout: string, task: WorkerTask): Promise<BuiltGateway> {
  // Server modules sit in dist/server/ by concern since issue 32, in dist/server/ since the layers (issue 24), in dist/
  // before (builtModule).
  const module = (file: string) => import(pathToFileURL(builtModule(checkout, file)).href);
  const [{ loadConfig }, { buildGateway }, { createLogger }, { GatewayMetrics }, { createGatewayServer }] =
    await Promise.all([
      module('config.js'),
      module('gateway.js'),
      module('logger.js'),
      module('metrics.js'),
      module('http-server.js'),
    ]);
  const config = loadConfig();
  const metrics = new GatewayMetrics({ clusterWorker: false });
  const built = buildGateway(config, config.upstreamUrl, { logger: createLogger({ level: config.logLevel }), metrics });
  if (task.transport === 'fetch') return built;
  // As main.ts serves it (a build of before issue 40 also took refusals of its own at the HTTP server).
  const server: Server = createGatewayServer(built.handler, config, metrics, built.refuseEarly);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, {
    connections: task.concurrency,
    pipelining: 1,
  });
  return { ...built, http: { server, pool } };
}

async function main(task: WorkerTask): Promise<WorkerResult> {
  const gateways: BuiltGateway[] = [];
  for (const build of task.builds) gateways.push(await load(build, task));
  const checked = (status: number, text: string) => {
    if (status !== 200 || text.includes('"errors"')) throw new Error(`HTTP ${status}: ${text.slice(0, 300)}`);
  };
  const operation = (gateway: BuiltGateway) => {
    const { http } = gateway;
    if (http !== undefined) {
      return async () => {
        const response = await http.pool.request({
          method: 'POST',
          path: '/graphql',
          headers: task.request.headers,
          body: task.request.body,
        });
        checked(response.statusCode, await response.body.text());
      };
    }
    return async () => {
      const response = await gateway.app.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: task.request.headers,
        body: task.request.body,
      });
      checked(response.status, await response.text());
    };
  };
  const run = async (one: () => Promise<void>, ops: number) => {
    let started = 0;
    await Promise.all(
      Array.from({ length: task.concurrency }, async () => {
        while (started++ < ops) await one();
      }),
    );
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
  await Promise.all(
    gateways.map(async (gateway) => {
      await gateway.http?.pool.close();
      gateway.http?.server.closeAllConnections();
      gateway.http?.server.close();
      await gateway.upstream.close();
    }),
  );
  return { perOperation };
}

const task = JSON.parse(process.env.AB_TASK ?? 'null') as WorkerTask | null;
if (task === null || process.send === undefined) throw new Error('bench/ab-worker.ts is started by bench/ab.ts');
try {
  process.send(await main(task), () => process.exit(0));
} catch (error) {
  process.send({ error: error instanceof Error ? error.message : String(error) }, () => process.exit(1));
}
