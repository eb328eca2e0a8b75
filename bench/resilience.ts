import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { OperationName } from '../src/domain/operations.js';
import type { Fault } from '../src/reference-upstream/faults.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { exitWithHelp, runBench, UsageError } from './cli.js';
import { builtModule } from './processes.js';

/*
 * `npm run bench:resilience -- <checkout>…`: what each build does when the upstream fails, and
 * with identical reads in flight together. In process: each checkout's built gateway (`npm run
 * build` there) is driven through `app.fetch` against a reference upstream of its own, whose
 * faults and call counts the scenarios use. So an older build (before the breaker and the
 * sharing) runs the same driver.
 *   outage 503 / refused / hang: 30 reads of one head one after another; per group of ten reads,
 *     the mean time to fail and the upstream calls per read (the breaker, where there is one,
 *     opens within the first ten).
 *   20 identical reads: 20 reads of one head with one token sent at once (the upstream answering
 *     in 20 ms), ten times; upstream calls per request, with the build's defaults and with
 *     UPSTREAM_DEDUPE=false.
 */

const usage = `Usage: npm run bench:resilience -- <checkout> [<checkout>…]
  Each checkout needs a node_modules and a build (npm ci && npm run build).`;

interface BuiltGateway {
  app: { fetch(url: string, init: RequestInit): Promise<Response> };
  upstream: { close(): Promise<void> };
}

const headReads: readonly OperationName[] = ['getHeadExt', 'getHeadById', 'getHeadExtById'];
const query = 'query Q1($id: ID!) { head(id: $id) { name url createdAt hair { name url } } }';

async function load(checkout: string, upstreamUrl: string, env: Record<string, string>): Promise<BuiltGateway> {
  const module = (file: string) => import(pathToFileURL(builtModule(checkout, file)).href);
  const [{ loadConfig }, { buildGateway }, { createLogger }, { GatewayMetrics }] = await Promise.all([
    module('config.js'),
    module('gateway.js'),
    module('logger.js'),
    module('metrics.js'),
  ]);
  const config = loadConfig({ NODE_ENV: 'production', UPSTREAM_URL: upstreamUrl, ...env });
  return buildGateway(config, upstreamUrl, {
    logger: createLogger({ level: 'silent' }),
    metrics: new GatewayMetrics({ defaultMetrics: false }),
  });
}

async function read(
  gateway: BuiltGateway,
  id: string,
  authorization = 'Bearer bench',
): Promise<{ ms: number; code: unknown }> {
  const started = performance.now();
  const response = await gateway.app.fetch('http://gateway/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization },
    body: JSON.stringify({ query, variables: { id } }),
  });
  const body = (await response.json()) as { errors?: { extensions?: { code?: unknown } }[] };
  return { ms: performance.now() - started, code: body.errors?.[0]?.extensions?.code ?? 'ok' };
}

const calls = (reference: ReferenceUpstream) =>
  headReads.reduce((sum, operation) => sum + (reference.countsByOperation()[operation] ?? 0), 0);

type Outage = '503' | 'refused' | 'hang';

/** 30 reads in a row while the upstream fails as `outage` says; per ten reads: mean ms, calls per read, codes. */
async function outage(checkout: string, kind: Outage): Promise<string[]> {
  const reference = await startReferenceUpstream({ record: false });
  // A hang is cut by the call's timeout: 300 ms here, so the bench takes seconds, not minutes.
  const gateway = await load(checkout, reference.url, kind === 'hang' ? { UPSTREAM_TIMEOUT_MS: '300' } : {});
  const id = reference.store.headIds()[0]!;
  const fault: Fault = kind === 'hang' ? { kind: 'latency', ms: 600_000 } : { kind: 'status', status: 503 };
  if (kind === 'refused') await reference.close();
  else for (const operation of headReads) reference.injectFault(operation, fault, 1_000);
  const lines: string[] = [];
  for (let group = 0; group < 3; group++) {
    const before = kind === 'refused' ? 0 : calls(reference);
    let ms = 0;
    const codes = new Set<unknown>();
    for (let n = 0; n < 10; n++) {
      const result = await read(gateway, id);
      ms += result.ms;
      codes.add(result.code);
    }
    const made = kind === 'refused' ? 'n/a (nobody to count)' : ((calls(reference) - before) / 10).toFixed(1);
    lines.push(
      `  reads ${group * 10 + 1}–${group * 10 + 10}: ${(ms / 10).toFixed(1)} ms to fail, ${made} upstream calls per read, ${[...codes].join(', ')}`,
    );
  }
  reference.releaseHeld();
  await gateway.upstream.close();
  if (kind !== 'refused') await reference.close();
  return lines;
}

/** Ten bursts of 20 identical reads (one token) sent together; the upstream answers each call in 20 ms. */
async function identicalReads(checkout: string, env: Record<string, string>): Promise<string> {
  const reference = await startReferenceUpstream({ record: false });
  const gateway = await load(checkout, reference.url, env);
  const id = reference.store.headIds()[0]!;
  await read(gateway, id); // connect the pool
  for (const operation of headReads) reference.injectFault(operation, { kind: 'latency', ms: 20 }, 10_000);
  const before = calls(reference);
  let failed = 0;
  for (let burst = 0; burst < 10; burst++) {
    const results = await Promise.all(Array.from({ length: 20 }, () => read(gateway, id)));
    failed += results.filter((r) => r.code !== 'ok').length;
  }
  const perRequest = (calls(reference) - before) / 200;
  await gateway.upstream.close();
  await reference.close();
  return `${perRequest.toFixed(2)} upstream calls per request (${calls(reference) - before} for 200 requests)${failed ? `, ${failed} failed` : ''}`;
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { help: { type: 'boolean', short: 'h' } },
  });
  exitWithHelp(values.help, usage);
  if (positionals.length === 0) throw new UsageError('at least one checkout');
  for (const checkout of positionals.map((path) => resolve(path))) {
    if (!existsSync(builtModule(checkout, 'gateway.js')))
      throw new UsageError(`${checkout}: no built gateway in dist/ (run npm run build there)`);
    console.log(`\n${checkout}`);
    for (const kind of ['503', 'refused', 'hang'] as const) {
      console.log(
        `outage (${kind === '503' ? 'every read answers 503' : kind === 'refused' ? 'upstream stopped: connection refused' : 'upstream hangs, UPSTREAM_TIMEOUT_MS=300'}):`,
      );
      for (const line of await outage(checkout, kind)) console.log(line);
    }
    console.log(`20 identical concurrent reads, defaults: ${await identicalReads(checkout, {})}`);
    console.log(
      `20 identical concurrent reads, UPSTREAM_DEDUPE=false: ${await identicalReads(checkout, { UPSTREAM_DEDUPE: 'false' })}`,
    );
  }
}

await runBench(main, usage);
