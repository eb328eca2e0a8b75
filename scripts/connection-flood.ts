import { connect, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { HOST, root, startServer, stopAll } from '../bench/processes.js';

/*
 * `npx tsx scripts/connection-flood.ts [--gateway DIR] [--open-files N] [--flood N] [--step N]`
 *
 * Not a test: how many trickling connections it takes to stop /health answering, on the public
 * port and on ADMIN_PORT, and how soon the gateway serves a query once the flood ends. The
 * reference upstream and the gateway (`DIR/dist/main.js`, this checkout by default: run
 * `npm run build` first; point DIR at another build to compare) run as child processes on
 * ephemeral ports, the gateway with at most N open files (prlimit; default 4096) so that this
 * process, with the shell's limit, can outnumber it. The flood opens `--step` connections at a
 * time up to `--flood`, each sending part of a request head and then a header line every 2 s;
 * after each step /health is asked on a fresh connection of each port (2 s to answer). Then the
 * flood holds its connections, still trickling, for `--hold` seconds (default 15) while a query
 * is sent every half second: when does the gateway cut them and serve again? Last, the flood's
 * sockets are closed and a query is sent every 10 ms on a fresh connection until one is answered.
 * Other gateway variables come from the environment (e.g. MAX_CONNECTIONS).
 */

const { values } = parseArgs({
  options: {
    gateway: { type: 'string', default: root },
    'open-files': { type: 'string', default: '4096' },
    flood: { type: 'string', default: '6000' },
    step: { type: 'string', default: '250' },
    hold: { type: 'string', default: '15' },
  },
});
const openFiles = Number(values['open-files']);
const floodSize = Number(values.flood);
const step = Number(values.step);
const holdSeconds = Number(values.hold);
const PROBE_TIMEOUT_MS = 2_000;

const upstream = await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], 1, {
  PORT: '0',
  HOST,
  RECORD: '0',
});
const gateway = await startServer(
  'gateway',
  [join(resolve(values.gateway), 'dist/main.js')],
  0,
  { PORT: '0', HOST, ADMIN_PORT: '0', UPSTREAM_URL: upstream.url, LOG_LEVEL: 'warn' },
  openFiles,
);
const publicUrl = new URL(gateway.url);
// A build without ADMIN_PORT prints no admin line.
const adminUrl = gateway.child.tail
  .map((line) => / on (http:\S+)$/.exec(line)?.[1])
  .find((url) => url !== undefined && !url.endsWith('/graphql'));
const seconds = (from: number) => ((performance.now() - from) / 1000).toFixed(1);

/** Whether `path` answers 200 on a connection of its own within PROBE_TIMEOUT_MS. */
async function answers(
  origin: string,
  path: string,
  init: { method?: 'GET' | 'POST'; body?: string } = {},
): Promise<boolean> {
  try {
    const response = await request(new URL(path, origin), {
      method: init.method ?? 'GET',
      reset: true,
      headers: { 'content-type': 'application/json' },
      body: init.body,
      headersTimeout: PROBE_TIMEOUT_MS,
      bodyTimeout: PROBE_TIMEOUT_MS,
    });
    await response.body.dump();
    return response.statusCode === 200;
  } catch {
    return false;
  }
}

interface Trickler {
  readonly socket: Socket;
  /** When it connected (undefined: never). */
  openedAt: number | undefined;
  closedAt: number | undefined;
}

/** A connection that sends part of a request head, then (from `trickle`) a header line at a time. */
function openTrickler(): Promise<Trickler> {
  return new Promise((done) => {
    const socket = connect({ host: publicUrl.hostname, port: Number(publicUrl.port) });
    const trickler: Trickler = { socket, openedAt: undefined, closedAt: undefined };
    socket.on('error', () => undefined);
    // Read (and drop) what the gateway sends, or its closing would be seen late.
    socket.resume();
    socket.once('close', () => {
      trickler.closedAt ??= performance.now();
      done(trickler);
    });
    socket.once('connect', () => {
      trickler.openedAt = performance.now();
      socket.write('GET /health HTTP/1.1\r\nHost: gateway\r\n');
      done(trickler);
    });
  });
}

const query = JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' });
const askQuery = () => answers(publicUrl.origin, '/graphql', { method: 'POST', body: query });
// What one query on a fresh connection costs here without a flood (the machine may be shared).
await askQuery();
const quietAt = performance.now();
await askQuery();
const quietMs = performance.now() - quietAt;

const flood: Trickler[] = [];
const trickle = setInterval(() => {
  for (const { socket } of flood) if (socket.writable) socket.write('x-trickle: 1\r\n');
}, 2_000);
let publicDownAt: number | undefined;
let adminDownAt: number | undefined;
console.log(`gateway ${values.gateway} (at most ${openFiles} open files), admin port: ${adminUrl ?? 'none'}`);
const floodStart = performance.now();
while (flood.length < floodSize) {
  const opened = await Promise.all(Array.from({ length: step }, openTrickler));
  flood.push(...opened);
  const [publicUp, adminUp] = await Promise.all([
    answers(publicUrl.origin, '/health'),
    adminUrl === undefined ? false : answers(adminUrl, '/health'),
  ]);
  // Counted after the probes: the closes of the step's dropped connections have arrived by then.
  const open = flood.filter((t) => t.closedAt === undefined).length;
  console.log(
    `${String(flood.length).padStart(6)} opened, ${String(open).padStart(6)} still open: /health ${publicUp ? 'answers' : 'FAILS'} on the public port${adminUrl === undefined ? '' : `, ${adminUp ? 'answers' : 'FAILS'} on the admin port`}`,
  );
  if (!publicUp) publicDownAt ??= flood.length;
  if (adminUrl !== undefined && !adminUp) adminDownAt ??= flood.length;
}
if (adminUrl !== undefined) {
  // The gateway's own view: what it holds, and what it closed on arrival.
  const text = await (await request(new URL('/metrics', adminUrl), { reset: true })).body.text();
  const series = text.split('\n').filter((line) => line.startsWith('gateway_connections_'));
  console.log(`the gateway's metrics at the flood's height: ${series.join(', ')}`);
}

// The attacker stops opening but keeps its connections trickling.
const holdStart = performance.now();
const floodSeconds = seconds(floodStart);
let servedAgainAfter: string | undefined;
while (performance.now() - holdStart < holdSeconds * 1000) {
  if (servedAgainAfter === undefined && (await askQuery())) servedAgainAfter = seconds(holdStart);
  await new Promise((resolve) => setTimeout(resolve, 500));
}
clearInterval(trickle);
// Closed by the gateway within a second of connecting: dropped on arrival; later: cut while trickling.
const lifetimes = flood.flatMap((t) =>
  t.openedAt === undefined || t.closedAt === undefined ? [] : [(t.closedAt - t.openedAt) / 1000],
);
const cutAfter = lifetimes.filter((lifetime) => lifetime >= 1);
const cut =
  cutAfter.length === 0
    ? 'none cut'
    : `${cutAfter.length} cut after ${Math.min(...cutAfter).toFixed(1)} to ${Math.max(...cutAfter).toFixed(1)} s of trickling`;
const dropped = lifetimes.length - cutAfter.length;
const stillOpen = flood.filter((t) => t.openedAt !== undefined && t.closedAt === undefined).length;
const endedAt = performance.now();
for (const { socket } of flood) socket.destroy();
let attempts = 0;
while (!(await askQuery())) {
  attempts++;
  await new Promise((resolve) => setTimeout(resolve, 10));
}
const servedAfterMs = performance.now() - endedAt;

console.log(
  `\n/health stopped answering on the public port at: ${publicDownAt === undefined ? `never (${floodSize} connections)` : `${publicDownAt} connections`}`,
);
if (adminUrl !== undefined)
  console.log(
    `/health stopped answering on the admin port at: ${adminDownAt === undefined ? `never (${floodSize} connections)` : `${adminDownAt} connections`}`,
  );
console.log(
  `flood of ${flood.length} in ${floodSeconds} s, then held ${holdSeconds} s still trickling: ${dropped} closed on arrival, ${cut}, ${stillOpen} still open`,
);
console.log(
  `while held, a query was served on the public port ${servedAgainAfter === undefined ? 'never' : `after ${servedAgainAfter} s`}`,
);
console.log(
  `flood closed: a query was answered ${servedAfterMs.toFixed(0)} ms later (${attempts} failed attempts before; one took ${quietMs.toFixed(0)} ms before the flood)`,
);
await stopAll();
