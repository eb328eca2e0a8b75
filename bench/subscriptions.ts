import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { exitWithHelp, integerOption, runBench, UsageError } from './cli.js';
import { procRss } from './proc.js';
import { type Child, HOST, root, startFlags, startServer, stop } from './processes.js';

/**
 * What a run measures: memory per subscription, one process's delivery, Q1 beside open subscriptions, delivery across
 * two processes over Redis.
 */
const PHASES = ['memory', 'delivery', 'q1', 'redis', 'polling'] as const;

const USAGE = `npm run bench:subscriptions [-- --subscribers 1000 --many 10000 --writes 50 --seconds 10 --phases memory,delivery,q1,redis --targets gateway,yoga]

Subscriptions, the gateway beside a bare yoga (createPubSub, @graphql-yoga/redis-event-target) on
the same machine and the same reference upstream: memory per open subscription (SSE and WebSocket,
at --subscribers and --many), a change delivered to --subscribers subscribers sharing a token
(upstream reads per change, p50/p99 from the write's answer to the last event), the same across
two processes and Redis, and Q1's throughput with --subscribers subscriptions open beside it.
A benchmark, not a test: figures, printed and written to bench/results/subscriptions-<time>.json.`;

type Server = { readonly name: string; readonly child: Child; readonly url: string };
type Kind = 'gateway' | 'yoga';

const SUBSCRIBE = (id: string) =>
  JSON.stringify({ query: `subscription { headChanged(id: "${id}") { head { name } } }` });
const Q1 = (id: string) => JSON.stringify({ query: `{ head(id: "${id}") { name url createdAt hair { name url } } }` });

/** A process's resident memory, from /proc. */
const rssOf = (child: Child) => procRss(child.process.pid!)!;

async function startUpstream(): Promise<string> {
  return (
    await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], 1, {
      PORT: '0',
      HOST,
      RECORD: '0',
    })
  ).url;
}

async function startTarget(kind: Kind, upstream: string, env: Record<string, string> = {}): Promise<Server> {
  const common = { PORT: '0', HOST, UPSTREAM_URL: upstream, LOG_LEVEL: 'warn' };
  const args =
    kind === 'gateway' ? [...startFlags(), 'dist/main.js'] : ['--import', 'tsx', 'bench/subscriptions/yoga-server.ts'];
  const started = await startServer(
    kind,
    args,
    0,
    kind === 'gateway'
      ? {
          ...common,
          WORKERS: '1',
          SUBSCRIPTIONS_MAX: '100000',
          SUBSCRIPTIONS_PER_CALLER: '100000',
          // One caller holds them all, each watching a head.
          SUBSCRIPTION_WATCHED_HEADS_PER_CALLER: '100000',
          SUBSCRIPTION_POLL_MS: '0',
          ...env,
        }
      : { ...common, ...env },
    20_000,
  );
  return { name: kind, ...started };
}

/** An open subscription: its events' arrival times. */
interface Open {
  readonly arrivals: number[];
  close(): void;
}

/** A subscription over SSE, by hand (no client library's cost in the bench process). */
function sse(url: string, id: string): Promise<Open> {
  return new Promise((resolve, reject) => {
    const arrivals: number[] = [];
    const body = SUBSCRIBE(id);
    const req: ClientRequest = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          'content-length': Buffer.byteLength(body),
        },
      },
      (response) => {
        if (response.statusCode !== 200) return reject(new Error(`SSE: ${response.statusCode}`));
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          for (let at = chunk.indexOf('event: next'); at !== -1; at = chunk.indexOf('event: next', at + 1))
            arrivals.push(performance.now());
        });
        response.on('error', () => undefined);
        resolve({ arrivals, close: () => req.destroy() });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** A subscription over WebSocket (graphql-transport-ws), by hand. */
function ws(url: string, id: string): Promise<Open> {
  return new Promise((resolve, reject) => {
    const arrivals: number[] = [];
    const socket = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    socket.on('message', (data) => {
      const message = JSON.parse(String(data)) as { type: string };
      if (message.type === 'connection_ack') {
        socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: JSON.parse(SUBSCRIBE(id)) }));
        resolve({ arrivals, close: () => socket.terminate() });
      } else if (message.type === 'next') arrivals.push(performance.now());
    });
    socket.on('error', reject);
  });
}

async function openMany(
  open: (url: string, id: string) => Promise<Open>,
  url: string,
  id: string,
  count: number,
): Promise<Open[]> {
  const opened: Open[] = [];
  for (let i = 0; i < count; i += 200)
    opened.push(...(await Promise.all(Array.from({ length: Math.min(200, count - i) }, () => open(url, id)))));
  return opened;
}

const post = async (url: string, body: string) =>
  (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).json();
const percentile = (values: readonly number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))]!;
const stats = async (upstream: string) =>
  ((await (await fetch(new URL('/__reference/stats', upstream))).json()) as { total: number }).total;

/**
 * Memory per subscription on a fresh process (earlier rounds' garbage would blur it): RSS after
 * opening `count` and settling, less RSS before (after a warm-up round of a tenth), over `count`;
 * and the RSS with them open. `npm run bench:sizing` takes its figure from here too.
 */
export async function memoryPer(
  kind: Kind,
  upstream: string,
  transport: 'sse' | 'websocket',
  id: string,
  count: number,
): Promise<{ bytes: number; rss: number }> {
  const target = await startTarget(kind, upstream);
  const open = transport === 'sse' ? sse : ws;
  try {
    for (const warm of await openMany(open, target.url, id, Math.ceil(count / 10))) warm.close();
    await sleep(2_000);
    const before = rssOf(target.child);
    const opened = await openMany(open, target.url, id, count);
    await sleep(2_000);
    const after = rssOf(target.child);
    for (const subscription of opened) subscription.close();
    return { bytes: Math.round((after - before) / count), rss: after };
  } finally {
    await stop(target.child.process);
  }
}

/**
 * Subscriptions held by a process of their own (bench/subscriptions/holder.ts); `rounds()` the times each round of
 * events was all in.
 */
async function holder(
  url: string,
  id: string,
  count: number,
): Promise<{ rounds: () => readonly number[]; stop: () => Promise<void> }> {
  const { child } = await startServer(
    'holder',
    ['--import', 'tsx', 'bench/subscriptions/holder.ts', url, id, String(count)],
    undefined,
    {},
    20_000,
  );
  const rounds: number[] = [];
  child.process.stdout!.on('data', (chunk: Buffer) => {
    for (const [, n, at] of String(chunk).matchAll(/^event (\d+) ([\d.]+)$/gm)) rounds[Number(n) - 1] = Number(at);
  });
  return { rounds: () => rounds, stop: () => stop(child.process) };
}

/**
 * A change delivered to `subscribers` held by processes of their own, one per target (each
 * target gets its share): upstream reads per change, p50/p99 from the write's answer to the last
 * subscriber's event.
 */
async function delivery(
  kind: Kind,
  targets: readonly Server[],
  upstream: string,
  id: string,
  subscribers: number,
  writes: number,
) {
  const holders = await Promise.all(
    targets.map((target) => holder(target.url, id, Math.ceil(subscribers / targets.length))),
  );
  await sleep(500);
  const lasts: number[] = [];
  let readsBefore = 0;
  // The first write warms the path up (and, over Redis, finds every channel subscribed): not counted.
  for (let n = -1; n < writes; n++) {
    if (n === 0) readsBefore = await stats(upstream);
    const round = n + 1;
    const write =
      kind === 'gateway'
        ? JSON.stringify({
            query: `mutation { updateHead(input: { id: "${id}", name: "bench ${n}" }) { head { id } } }`,
          })
        : JSON.stringify({ query: `mutation { touch(id: "${id}") }` });
    await post(targets[0]!.url, write);
    const answeredAt = performance.timeOrigin + performance.now();
    while (!holders.every((held) => held.rounds()[round] !== undefined)) await sleep(1);
    if (n >= 0) lasts.push(Math.max(...holders.map((held) => held.rounds()[round]!)) - answeredAt);
    await sleep(50);
  }
  const reads = (await stats(upstream)) - readsBefore - (kind === 'gateway' ? writes : 0);
  await Promise.all(holders.map((held) => held.stop()));
  return {
    'upstream reads per change': Math.round((reads / writes) * 10) / 10,
    'p50 ms to the last event': Math.round(percentile(lasts, 50)),
    'p99 ms to the last event': Math.round(percentile(lasts, 99)),
  };
}

/**
 * Q1 for `seconds` (autocannon, 16 connections), from a process of its own: the bench's own heap (ten thousand sockets
 * opened and closed) would slow it.
 */
function q1(url: string, id: string, seconds: number): Promise<number> {
  const cli = join(root, 'node_modules/autocannon/autocannon.js');
  const args = [
    cli,
    '--json',
    '-c',
    '16',
    '-d',
    String(seconds),
    '-m',
    'POST',
    '-H',
    'content-type=application/json',
    '-b',
    Q1(id),
    url,
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += String(chunk)));
    child.once('exit', (code) =>
      code === 0
        ? resolve((JSON.parse(out) as { requests: { average: number } }).requests.average)
        : reject(new Error(`autocannon exited ${code}`)),
    );
  });
}

/**
 * Changes made outside the gateway (the reference upstream's own Update Head), found by polling
 * (`pollMs`) at two processes over Redis, `subscribers` split between them: ms from each change to
 * the last subscriber's event, and the poll reads per interval for the whole fleet (Get Head By Id
 * reads, less the one per change each process makes for its subscribers).
 */
async function polling(
  upstream: string,
  id: string,
  subscribers: number,
  changes: number,
  pollMs: number,
): Promise<Record<string, number>> {
  const redis = startRedis();
  await sleep(300);
  const pair = [
    await startTarget('gateway', upstream, { REDIS_URL: redis.url, SUBSCRIPTION_POLL_MS: String(pollMs) }),
    await startTarget('gateway', upstream, { REDIS_URL: redis.url, SUBSCRIPTION_POLL_MS: String(pollMs) }),
  ];
  const holders = await Promise.all(pair.map((target) => holder(target.url, id, Math.ceil(subscribers / 2))));
  const login = (await (
    await fetch(new URL('login', `${upstream}/`), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(DEMO_CREDENTIALS),
    })
  ).json()) as { access_token?: string };
  const counts = async () =>
    ((await (await fetch(new URL('/__reference/stats', upstream))).json()) as { counts: Record<string, number> }).counts
      .getHeadById ?? 0;
  await sleep(pollMs * 2);
  const readsBefore = await counts();
  const startedAt = performance.now();
  const seen: number[] = [];
  for (let n = 0; n < changes; n++) {
    const response = await fetch(`${upstream}/heads/${id}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${login.access_token ?? ''}` },
      body: JSON.stringify({ name: `outside ${n}` }),
    });
    if (!response.ok) throw new Error(`outside change: ${response.status}`);
    const changedAt = performance.timeOrigin + performance.now();
    while (!holders.every((held) => held.rounds()[n] !== undefined)) await sleep(5);
    seen.push(Math.max(...holders.map((held) => held.rounds()[n]!)) - changedAt);
    await sleep(pollMs / 3);
  }
  const intervals = (performance.now() - startedAt) / pollMs;
  const reads = (await counts()) - readsBefore;
  await Promise.all(holders.map((held) => held.stop()));
  for (const server of pair) await stop(server.child.process);
  redis.stop();
  return {
    [`SUBSCRIPTION_POLL_MS=${pollMs}: max ms from an outside change to the last event`]: Math.round(Math.max(...seen)),
    [`SUBSCRIPTION_POLL_MS=${pollMs}: p50 ms from an outside change to the last event`]: Math.round(
      percentile(seen, 50),
    ),
    // Each change is read once more by each process for its subscribers (they share a token): the rest are the polls.
    [`SUBSCRIPTION_POLL_MS=${pollMs}: poll reads of the head per interval, two processes`]:
      Math.round(((reads - changes * pair.length) / intervals) * 100) / 100,
  };
}

function startRedis(): { url: string; stop(): void } {
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  return { url: `redis://127.0.0.1:${port}`, stop: () => child.kill('SIGKILL') };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      targets: { type: 'string' },
      subscribers: { type: 'string', default: '1000' },
      many: { type: 'string', default: '10000' },
      writes: { type: 'string', default: '50' },
      seconds: { type: 'string', default: '10' },
      phases: { type: 'string', default: PHASES.join(',') },
      help: { type: 'boolean' },
    },
  });
  exitWithHelp(values.help, USAGE);
  const subscribers = integerOption('subscribers', values.subscribers, 10, 20_000);
  const many = integerOption('many', values.many, 10, 30_000);
  const writes = integerOption('writes', values.writes, 2, 1_000);
  const seconds = integerOption('seconds', values.seconds, 1, 120);
  const phases = new Set(values.phases.split(','));
  for (const phase of phases)
    if (!(PHASES as readonly string[]).includes(phase))
      throw new UsageError(`--phases: expected some of ${PHASES.join(',')}, got ${phase}`);
  const kinds = (values.targets ?? 'gateway,yoga').split(',') as Kind[];
  console.log('Building (npm run build)…');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit', timeout: 180_000 });
  const upstream = await startUpstream();
  const id = ((await (await fetch(`${upstream}/heads?page=1&size=1`)).json()) as { items: { id: string }[] }).items[0]!
    .id;
  const figures: Record<string, Record<string, unknown>> = {};
  for (const kind of kinds) {
    const row: Record<string, unknown> = {};
    if (phases.has('memory')) {
      for (const transport of ['sse', 'websocket'] as const) {
        for (const count of [subscribers, many]) {
          const { bytes, rss } = await memoryPer(kind, upstream, transport, id, count);
          row[`bytes per subscription, ${transport}, ${count}`] = bytes;
          if (count === many) row[`RSS MB, ${many} ${transport} subscriptions open`] = Math.round(rss / 2 ** 20);
        }
      }
    }
    const target = await startTarget(kind, upstream);
    if (phases.has('delivery')) Object.assign(row, await delivery(kind, [target], upstream, id, subscribers, writes));
    if (kind === 'gateway' && phases.has('q1')) {
      // Alone and with the subscriptions open (held by a process of their own), in turns.
      await q1(target.url, id, seconds); // warm-up, not counted
      const alone: number[] = [];
      const withOpen: number[] = [];
      for (let round = 0; round < 3; round++) {
        alone.push(await q1(target.url, id, seconds));
        const held = await holder(target.url, id, subscribers);
        await sleep(1_000);
        withOpen.push(await q1(target.url, id, seconds));
        await held.stop();
        await sleep(1_000);
      }
      const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
      row['Q1 req/s alone'] = Math.round(mean(alone));
      row[`Q1 req/s with ${subscribers} subscriptions open`] = Math.round(mean(withOpen));
      row['Q1 with them / alone'] = Math.round((mean(withOpen) / mean(alone)) * 1000) / 1000;
    }
    await stop(target.child.process);
    if (phases.has('redis')) {
      const redis = startRedis();
      await sleep(300);
      const pair = [
        await startTarget(kind, upstream, { REDIS_URL: redis.url }),
        await startTarget(kind, upstream, { REDIS_URL: redis.url }),
      ];
      await sleep(500);
      for (const [name, value] of Object.entries(await delivery(kind, pair, upstream, id, subscribers, writes)))
        row[`two processes over Redis: ${name}`] = value;
      for (const server of pair) await stop(server.child.process);
      redis.stop();
    }
    if (kind === 'gateway' && phases.has('polling'))
      Object.assign(row, await polling(upstream, id, subscribers, 10, 1_000));
    figures[kind] = row;
    console.table({ [kind]: row });
  }
  const ratios: Record<string, number> = {};
  for (const name of Object.keys(figures.gateway!)) {
    const ours = figures.gateway![name];
    const theirs = figures.yoga?.[name];
    if (typeof ours === 'number' && typeof theirs === 'number' && theirs !== 0)
      ratios[name] = Math.round((ours / theirs) * 100) / 100;
  }
  console.log('gateway / yoga:');
  console.table(ratios);
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  const file = join(root, `bench/results/subscriptions-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ options: { subscribers, many, writes, seconds }, figures, ratios }, null, 2));
  console.log(`Written to ${file}`);
}

// Run only as a script (`tsx bench/subscriptions.ts`), not when bench/sizing.ts imports memoryPer.
const invokedAs = process.argv[1];
if (invokedAs !== undefined && realpathSync(invokedAs) === realpathSync(fileURLToPath(import.meta.url)))
  await runBench(main, USAGE);
