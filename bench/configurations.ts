import { type ChildProcess, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { cpuSeconds } from './proc.js';
import { HOST, pinning, root, spawnNode, startFlags, stop } from './processes.js';

/*
 * `npm run bench:configurations`: what each production configuration costs the hot case, beside
 * the floor, in one sitting. The peer bench's upstream, its load generator and its queries
 * (../shared/peer-bench: 16 connections, every answer checked, UPSTREAM_DEDUPE=false so every
 * request makes its call) drive the peer bench's floor and the built gateway in each
 * configuration, one after another, round after round (the order turned each round); each
 * configuration's share of the floor, and of the default configuration's share, in the same
 * sitting. Trusted documents only sends the query by its id in a manifest made for the run.
 */

const peerBench = join(root, '..', 'shared', 'peer-bench');

interface Configuration {
  readonly name: string;
  readonly env: Readonly<Record<string, string>>;
  /** Send the query by its id (trusted documents only). */
  readonly byId?: boolean;
  /** Needs Redis (REDIS_URL). */
  readonly redis?: boolean;
}

const configurations: readonly Configuration[] = [
  { name: 'defaults', env: {} },
  // What the schema usage counter costs (on in the defaults): the defaults without it.
  { name: 'schema usage off', env: { METRICS_SCHEMA_USAGE: 'false' } },
  { name: 'caller limit in memory', env: { RATE_LIMIT_REQUESTS_PER_SECOND: '100000' } },
  { name: 'caller limit in Redis', env: { RATE_LIMIT_REQUESTS_PER_SECOND: '100000' }, redis: true },
  { name: 'trusted documents only', env: { TRUSTED_DOCUMENTS_ONLY: 'true' }, byId: true },
  {
    name: 'trusted documents only, cache in Redis',
    env: { TRUSTED_DOCUMENTS_ONLY: 'true', RESPONSE_CACHE_TTL_MS: '600000' },
    byId: true,
    redis: true,
  },
  { name: 'cache in memory', env: { RESPONSE_CACHE_TTL_MS: '600000' } },
  // Every answer kept for a millisecond: each request a miss that runs compiled and writes its answer to Redis.
  { name: 'cache in Redis, every request a miss', env: { RESPONSE_CACHE_TTL_MS: '1' }, redis: true },
];

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '2' },
    query: { type: 'string', default: 'Q1' },
    duration: { type: 'string', default: '8' },
    only: { type: 'string' },
    checkout: { type: 'string' },
  },
});
/** The built checkout measured (`--checkout`, another build of the gateway: a reference's): this one by default. */
const checkout = values.checkout ?? root;
const rounds = Number(values.rounds);
const chosen =
  values.only === undefined ? configurations : configurations.filter((c) => values.only!.split(',').includes(c.name));

/** The peer bench's data and queries (its own module, as its harness uses them). */
const { BENCH_TOKEN, headId } = (await import(join(peerBench, 'lib/data.mjs'))) as {
  BENCH_TOKEN: string;
  headId: (index: number) => string;
};
const queries: Record<string, string> = {
  Q1: `{ head(id: "${headId(41)}") { name url createdAt hair { name url } } }`,
  Q2: '{ heads(first: 50) { nodes { name hair { name } } } }',
  Q3: '{ heads(first: 20) { nodes { headMetadata } } }',
};
const query = queries[values.query];
if (query === undefined) throw new Error(`--query: one of ${Object.keys(queries).join(', ')}`);
const documentId = `sha256:${createHash('sha256').update(query).digest('hex')}`;
const manifest = join(mkdtempSync(join(tmpdir(), 'gateway-configurations-')), 'manifest.json');
writeFileSync(manifest, JSON.stringify({ [documentId]: query }));

const UPSTREAM_PORT = 4190;
const TARGET_PORT = 4191;
const REDIS_PORT = 4192;
const upstreamUrl = `http://${HOST}:${UPSTREAM_PORT}/v2`;

async function answering(url: string, body: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status < 500)
        return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url}: not answering`);
}

/** The peer bench's load generator on CPU 1: req/s and p99 over `seconds`. */
function load(body: string, seconds: number): { rps: number; p99: number; failed: number; total: number } {
  const job = {
    url: `http://${HOST}:${TARGET_PORT}/graphql`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${BENCH_TOKEN}` },
    body,
    connections: 16,
    duration: seconds,
    check: 'noErrors',
  };
  const args = [join(peerBench, 'lib/loadgen.mjs'), JSON.stringify(job)];
  const out = execFileSync(
    pinning ? '/usr/bin/taskset' : process.execPath,
    pinning ? ['-c', '1', process.execPath, ...args] : args,
    { encoding: 'utf8' },
  );
  const result = JSON.parse(out) as {
    rps: number;
    total: number;
    latencyMs: { p99: number };
    errors: number;
    non2xx: number;
    mismatches: number;
  };
  return {
    rps: result.rps,
    total: result.total,
    p99: result.latencyMs.p99,
    failed: result.errors + result.non2xx + result.mismatches,
  };
}

/** One target on CPU 0, warmed up then measured: its req/s, p99 and CPU µs per request. */
async function measure(
  start: () => ChildProcess,
  body: string,
): Promise<{ rps: number; p99: number; failed: number; cpuUs: number }> {
  const child = start();
  try {
    await answering(`http://${HOST}:${TARGET_PORT}/graphql`, '{"query":"{ __typename }"}');
    load(body, 3);
    const before = cpuSeconds(child.pid!);
    const result = load(body, Number(values.duration));
    return { ...result, cpuUs: ((cpuSeconds(child.pid!) - before) * 1e6) / result.total };
  } finally {
    await stop(child);
  }
}

const floor = () =>
  spawnNode([join(peerBench, 'comparators/floor/server.mjs')], 0, {
    UPSTREAM_URL: upstreamUrl,
    PORT: String(TARGET_PORT),
    HOST,
  });
const gateway = (configuration: Configuration) => () =>
  spawnNode([...startFlags(), join(checkout, 'dist/main.js')], 0, {
    UPSTREAM_URL: upstreamUrl,
    PORT: String(TARGET_PORT),
    HOST,
    NODE_ENV: 'production',
    SHUTDOWN_DELAY_MS: '0',
    UPSTREAM_DEDUPE: 'false',
    ...(configuration.byId ? { TRUSTED_DOCUMENTS_FILE: manifest } : {}),
    ...(configuration.redis ? { REDIS_URL: `redis://${HOST}:${REDIS_PORT}` } : {}),
    ...configuration.env,
  });

if (!existsSync(join(peerBench, 'node_modules')))
  throw new Error('The peer bench has no node_modules: run `cd ../shared/peer-bench && npm ci` once.');
if (!existsSync(join(checkout, 'dist/main.js')))
  throw new Error(`No build in ${checkout}: run \`npm run build\` there first.`);
const upstream = spawnNode([join(peerBench, 'upstream.mjs'), '--port', String(UPSTREAM_PORT)], 1, {});
const withRedis = chosen.some((c) => c.redis);
// Redis beside the upstream on CPU 1, as a managed one would be on a host of its own.
if (withRedis)
  execFileSync(pinning ? '/usr/bin/taskset' : 'redis-server', [
    ...(pinning ? ['-c', '1', 'redis-server'] : []),
    '--port',
    String(REDIS_PORT),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--daemonize',
    'yes',
  ]);
await new Promise((resolve) => setTimeout(resolve, 500));

const results: Record<string, { rps: number[]; p99: number[]; share: number[]; cpuUs: number[] }> = {};
try {
  for (let round = 0; round < rounds; round++) {
    const order: (Configuration | 'floor')[] = ['floor', ...chosen];
    if (round % 2 === 1) order.reverse();
    const measured: Record<string, { rps: number; p99: number; cpuUs: number }> = {};
    for (const target of order) {
      const name = target === 'floor' ? 'floor' : target.name;
      const body = JSON.stringify(target !== 'floor' && target.byId ? { documentId } : { query });
      if (target !== 'floor' && target.redis) execFileSync('redis-cli', ['-p', String(REDIS_PORT), 'flushall']);
      const result = await measure(target === 'floor' ? floor : gateway(target), body);
      if (result.failed > 0) throw new Error(`${name}: ${result.failed} answers failed the check`);
      measured[name] = result;
      console.log(
        `round ${round + 1}: ${name.padEnd(40)} ${Math.round(result.rps).toString().padStart(6)} req/s  p99 ${result.p99.toFixed(2)} ms  ${Math.round(result.cpuUs)} µs CPU a request`,
      );
    }
    for (const [name, result] of Object.entries(measured)) {
      results[name] ??= { rps: [], p99: [], share: [], cpuUs: [] };
      const entry = results[name];
      entry.rps.push(result.rps);
      entry.cpuUs.push(result.cpuUs);
      entry.p99.push(result.p99);
      entry.share.push(result.rps / measured.floor!.rps);
    }
  }
} finally {
  await stop(upstream);
  if (withRedis) execFileSync('redis-cli', ['-p', String(REDIS_PORT), 'shutdown', 'nosave']);
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const defaultShare = median(results.defaults?.share ?? [Number.NaN]);
const lines = [
  `${values.query}, ${checkout}, ${rounds} rounds, medians: req/s, share of the floor, and of the defaults' share (same sitting); CPU µs a request`,
  '',
  "| configuration | req/s | p99 ms | CPU µs a request | share of the floor | of the defaults' share |",
  '|---|--:|--:|--:|--:|--:|',
];
for (const [name, entry] of Object.entries(results)) {
  const share = median(entry.share);
  lines.push(
    `| ${name} | ${Math.round(median(entry.rps))} | ${median(entry.p99).toFixed(2)} | ${Math.round(median(entry.cpuUs))} | ${share.toFixed(2)} | ${name === 'floor' ? '' : (share / defaultShare).toFixed(2)} |`,
  );
}
console.log(`\n${lines.join('\n')}`);
const dir = join(root, 'bench/results');
mkdirSync(dir, { recursive: true });
writeFileSync(
  join(dir, `configurations-${new Date().toISOString().replace(/[:.]/g, '-')}.md`),
  `${lines.join('\n')}\n`,
);
process.exit(0);
