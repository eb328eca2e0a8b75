import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';

/*
 * `npm run soak -- [--minutes 3 | --seconds 40] [--connections 16] [--interval 10] [--warmup N]
 *                  [--tolerance 15] [--log-level info]`
 *
 * Not a test: a bounded endurance run on loopback. Starts the reference upstream (RECORD=0) and
 * the gateway (`src/main.ts`, UPSTREAM_URL pointing at it) as child processes on 127.0.0.1
 * ephemeral ports, warms up, then drives sustained load with autocannon (in this process)
 * cycling realistic operations: a head with its hair, a heads page, heads with metadata (Hair B
 * included), and permissions with a bearer token from the login mutation.
 *
 * Every --interval seconds it prints throughput, errors (non-2xx, socket errors, timeouts and
 * responses whose GraphQL body carries `errors`, all counted, not sampled) and the gateway's
 * heap used and RSS, read from its /metrics (prom-client default metrics), or RSS from
 * /proc/<pid>/status when /metrics is not there. At the end: totals, req/s, errors, memory after
 * warm-up vs at the end, and whether memory stayed flat: RSS and the heap that survives full
 * collections at the end within --tolerance % of the start. A run shorter than a minute
 * (`--seconds 10`), or with too few full collections, is not judged on memory and says so.
 * Exit code 0 when there were no errors and memory stayed flat or was not judged, 1 otherwise, 2
 * on a usage or start-up problem. It stops by itself; Ctrl-C stops it early (and still cleans up).
 */

const usage = `Usage: npm run soak -- [--minutes 3 | --seconds 40] [--connections 16] [--interval 10] [--warmup SECONDS] [--tolerance 15] [--log-level info]`;

const root = fileURLToPath(new URL('..', import.meta.url));
const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 30_000;
const SAMPLE_EVERY_MS = 1_000;
/**
 * Memory is judged on the samples that follow a full collection, comparing the first and the last
 * few (up to 5, or a fifth when there are more), in a run of JUDGED_FROM_SECONDS or more that had
 * at least 2 × MIN_SETTLED_COMPARED of them. A shorter run is not judged on memory: a leak cannot
 * show in it above the noise, and a run right after warm-up may not have had a full collection yet.
 */
const JUDGED_FROM_SECONDS = 60;
const MIN_SETTLED_COMPARED = 3;

// ---- options ----

class UsageError extends Error {}

function options() {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string' },
      seconds: { type: 'string' },
      connections: { type: 'string', default: '16' },
      interval: { type: 'string', default: '10' },
      warmup: { type: 'string' },
      tolerance: { type: 'string', default: '15' },
      'log-level': { type: 'string', default: 'info' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
  const number = (name: string, value: string, min: number, max: number, integer = true) => {
    const n = Number(value);
    if (!Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min || n > max) {
      throw new UsageError(
        `--${name}: expected ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got ${JSON.stringify(value)}`,
      );
    }
    return n;
  };
  if (values.minutes !== undefined && values.seconds !== undefined)
    throw new UsageError('give --minutes or --seconds, not both');
  const durationSec =
    values.seconds !== undefined
      ? number('seconds', values.seconds, 5, 24 * 3600)
      : number('minutes', values.minutes ?? '3', 0.1, 24 * 60, false) * 60;
  const interval = number('interval', values.interval, 1, 3600);
  // Warm-up long enough for JIT, pools and caches to settle; not counted in the figures.
  const warmupSec =
    values.warmup !== undefined
      ? number('warmup', values.warmup, 0, 600)
      : Math.min(30, Math.max(10, Math.round(durationSec * 0.25)));
  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (!levels.includes(values['log-level']))
    throw new UsageError(
      `--log-level: expected one of ${levels.join(', ')}, got ${JSON.stringify(values['log-level'])}`,
    );
  return {
    durationSec: Math.round(durationSec),
    warmupSec,
    intervalSec: interval,
    connections: number('connections', values.connections, 1, 1_000),
    tolerancePct: number('tolerance', values.tolerance, 1, 1_000, false),
    logLevel: values['log-level'],
  };
}

// ---- child processes ----

interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  /** Output lines after the ready line (the gateway's structured logs, mostly). */
  lines: number;
  readonly tail: string[];
  /** Set by the caller: a line containing it is counted (the token must never be logged). */
  watch?: string;
  watchHits: number;
}

const children = new Set<Child>();

/** Starts `node --import tsx <script>` and resolves with the first stdout line matching `ready`. */
function startChild(
  name: string,
  script: string,
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: Child; match: RegExpMatchArray }> {
  const processHandle = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const child: Child = { name, process: processHandle, lines: 0, tail: [], watchHits: 0 };
  children.add(child);
  const remember = (line: string) => {
    child.tail.push(line);
    if (child.tail.length > 40) child.tail.shift();
  };
  createInterface({ input: processHandle.stderr! }).on('line', remember);
  return new Promise((resolve, reject) => {
    let started = false;
    const timer = setTimeout(
      () => reject(new Error(`${name} did not start within ${START_TIMEOUT_MS} ms:\n${child.tail.join('\n')}`)),
      START_TIMEOUT_MS,
    );
    createInterface({ input: processHandle.stdout! }).on('line', (line) => {
      if (started) {
        child.lines++;
        if (child.watch !== undefined && line.includes(child.watch)) child.watchHits++;
        if (/"level":(50|60)|shutting down/.test(line)) remember(line);
        return;
      }
      remember(line);
      const match = ready.exec(line);
      if (match) {
        started = true;
        clearTimeout(timer);
        resolve({ child, match });
      }
    });
    processHandle.once('exit', (code, signal) => {
      children.delete(child);
      if (!started) {
        clearTimeout(timer);
        reject(new Error(`${name} exited (${signal ?? code}) before it was ready:\n${child.tail.join('\n')}`));
      }
    });
  });
}

async function stopChild(child: Child): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.process.once('exit', () => resolve()));
  child.process.kill('SIGINT');
  const forced = setTimeout(() => child.process.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(forced);
}

const stopAll = () => Promise.all([...children].map(stopChild));

// ---- HTTP helpers (loopback only) ----

async function getJson<T>(url: string): Promise<T> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return (await response.json()) as T;
}

async function graphql<T>(url: string, query: string, variables?: Record<string, unknown>): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
    body: JSON.stringify({ query, variables }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await response.json()) as { data?: T; errors?: unknown[] };
  if (!response.ok || body.errors !== undefined || body.data === undefined)
    throw new Error(`${query.slice(0, 40)}…: HTTP ${response.status} ${JSON.stringify(body).slice(0, 300)}`);
  return body.data;
}

// ---- gateway memory ----

interface Memory {
  readonly at: number;
  readonly rss: number;
  /** The rest are undefined when only /proc was readable. */
  readonly heapUsed: number | undefined;
  /** Heap used outside the young generation: what survived collections, without the new space's fill. */
  readonly retained: number | undefined;
  /** Full (major) collections so far. */
  readonly fullGcs: number | undefined;
}

/** The first sample of `name`, or the one with exactly these `labels` (`kind="major"`). */
function metricValue(text: string, name: string, labels?: string): number | undefined {
  const match = new RegExp(
    `^${name}${labels === undefined ? '(?:\\{[^}]*\\})?' : `\\{${labels}\\}`} ([0-9.e+-]+)`,
    'm',
  ).exec(text);
  return match ? Number(match[1]) : undefined;
}

async function readMemory(metricsUrl: string, pid: number | undefined): Promise<Memory | undefined> {
  try {
    const response = await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) });
    const text = await response.text();
    const rss = metricValue(text, 'process_resident_memory_bytes');
    const heapUsed = metricValue(text, 'nodejs_heap_size_used_bytes');
    const young = ['new', 'new_large_object'].map(
      (space) => metricValue(text, 'nodejs_heap_space_size_used_bytes', `space="${space}"`) ?? 0,
    );
    const retained = heapUsed === undefined ? undefined : heapUsed - young[0]! - young[1]!;
    // prom-client shows a GC kind only once it has happened.
    const fullGcs = metricValue(text, 'nodejs_gc_duration_seconds_count', 'kind="major"') ?? 0;
    if (response.ok && rss !== undefined) return { at: performance.now(), rss, heapUsed, retained, fullGcs };
  } catch {
    // fall through to /proc
  }
  if (pid === undefined) return undefined;
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status);
    return kb
      ? {
          at: performance.now(),
          rss: Number(kb[1]) * 1024,
          heapUsed: undefined,
          retained: undefined,
          fullGcs: undefined,
        }
      : undefined;
  } catch {
    return undefined;
  }
}

const mb = (bytes: number | undefined) => (bytes === undefined ? 'n/a' : `${(bytes / 1024 / 1024).toFixed(1)} MB`);
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** Least-squares slope of value over time, in bytes per minute. */
function slopePerMinute(samples: Memory[], pick: (m: Memory) => number | undefined): number | undefined {
  const points = samples
    .map((s) => [s.at / 60_000, pick(s)] as const)
    .filter((p): p is readonly [number, number] => p[1] !== undefined);
  if (points.length < 3) return undefined;
  const mx = mean(points.map((p) => p[0]));
  const my = mean(points.map((p) => p[1]));
  const num = points.reduce((sum, [x, y]) => sum + (x - mx) * (y - my), 0);
  const den = points.reduce((sum, [x]) => sum + (x - mx) ** 2, 0);
  return den === 0 ? undefined : num / den;
}

// ---- autocannon (no bundled types: the part used here, typed locally) ----

interface AutocannonRequest {
  method: 'POST' | 'GET';
  path: string;
  headers?: Record<string, string>;
  body?: string;
  setupRequest?: (request: AutocannonRequest, context: Record<string, unknown>) => AutocannonRequest;
  onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
}

interface AutocannonResult {
  requests: { total: number; average: number };
  latency: { p50: number; p99: number; average: number; max: number };
  throughput: { average: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  duration: number;
}

interface AutocannonInstance {
  on(
    event: 'response',
    listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void,
  ): void;
  on(event: 'reqError', listener: (error: Error) => void): void;
  stop(): void;
}

type Autocannon = (
  options: { url: string; connections: number; duration: number; requests: AutocannonRequest[]; timeout?: number },
  callback: (error: Error | null, result: AutocannonResult) => void,
) => AutocannonInstance;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

// ---- the load ----

interface Counters {
  responses: number;
  non2xx: number;
  graphqlErrors: number;
  socketErrors: number;
  byQuery: Record<string, number>;
  firstErrors: string[];
}

const newCounters = (): Counters => ({
  responses: 0,
  non2xx: 0,
  graphqlErrors: 0,
  socketErrors: 0,
  byQuery: {},
  firstErrors: [],
});

/** `cursors[i]` is the `after` of page i+1 of 20 (page 0 has none), as the gateway issued them. */
function workload(token: string, headIds: string[], cursors: string[], counters: () => Counters): AutocannonRequest[] {
  const json = { 'content-type': 'application/json', accept: 'application/graphql-response+json' };
  const body = (query: string, variables?: Record<string, unknown>) => JSON.stringify({ query, variables });
  const counted = (name: string) => (status: number, text: string) => {
    const c = counters();
    c.byQuery[name] = (c.byQuery[name] ?? 0) + 1;
    // A GraphQL error in a 2xx body (non-2xx are counted from the status).
    if (status >= 200 && status < 300 && text.includes('"errors"')) {
      c.graphqlErrors++;
      if (c.firstErrors.length < 5) c.firstErrors.push(`${name}: ${text.slice(0, 200)}`);
    } else if ((status < 200 || status >= 300) && c.firstErrors.length < 5) {
      c.firstErrors.push(`${name}: HTTP ${status} ${text.slice(0, 200)}`);
    }
  };
  let next = 0;
  const nextHead = () => headIds[next++ % headIds.length]!;
  let page = 0;
  return [
    {
      method: 'POST',
      path: '/graphql',
      headers: json,
      setupRequest: (request) => ({
        ...request,
        body: body(
          `query HeadWithHair($id: ID!) { head(id: $id) { id name url createdAt updatedAt hair { name url style gender sourceType } } }`,
          { id: nextHead() },
        ),
      }),
      onResponse: counted('headWithHair'),
    },
    {
      method: 'POST',
      path: '/graphql',
      headers: json,
      setupRequest: (request) => {
        const index = page++ % (cursors.length + 1);
        const after = index === 0 ? {} : { after: cursors[index - 1] };
        return {
          ...request,
          body: body(
            `query HeadsPage($after: String) { heads(first: 20, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { id name style createdAt } } }`,
            after,
          ),
        };
      },
      onResponse: counted('headsPage'),
    },
    {
      method: 'POST',
      path: '/graphql',
      headers: json,
      body: body(
        `query HeadsWithMetadata { heads(first: 10) { nodes { uuid name headMetadata hair { name hairMetadata } } } }`,
      ),
      onResponse: counted('headsWithMetadata'),
    },
    {
      method: 'POST',
      path: '/graphql',
      headers: { ...json, authorization: `Bearer ${token}` },
      body: body(`query Permissions { permissions(first: 20) { totalCount nodes { id role } } }`),
      onResponse: counted('permissions'),
    },
  ];
}

function runLoad(
  url: string,
  seconds: number,
  connections: number,
  requests: AutocannonRequest[],
  onResponse: (status: number) => void,
  onError: () => void,
) {
  let instance: AutocannonInstance | undefined;
  const done = new Promise<AutocannonResult>((resolve, reject) => {
    instance = autocannon({ url, connections, duration: seconds, requests, timeout: 20 }, (error, result) =>
      error ? reject(error) : resolve(result),
    );
    instance.on('response', (_client, statusCode) => onResponse(statusCode));
    instance.on('reqError', onError);
  });
  return { done, stop: () => instance?.stop() };
}

// ---- main ----

async function main(): Promise<number> {
  let opts: ReturnType<typeof options>;
  try {
    opts = options();
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${error.message}\n${usage}`);
    return 2;
  }

  const upstream = await startChild(
    'reference upstream',
    'src/reference-upstream/main.ts',
    { PORT: '0', HOST, RECORD: '0' },
    /listening on (http:\/\/\S+\/v2)/,
  );
  const upstreamUrl = upstream.match[1]!;
  const gateway = await startChild(
    'gateway',
    'src/main.ts',
    // One process (WORKERS=1), so the pid and /metrics are the serving process's.
    { UPSTREAM_URL: upstreamUrl, PORT: '0', HOST, LOG_LEVEL: opts.logLevel, NODE_ENV: 'production', WORKERS: '1' },
    /listening on (http:\/\/\S+)\/graphql/,
  );
  const base = gateway.match[1]!;
  const graphqlUrl = `${base}/graphql`;
  const pid = gateway.child.process.pid;
  console.log(
    `Reference upstream ${upstreamUrl} (RECORD=0) · gateway ${graphqlUrl} (pid ${pid}, LOG_LEVEL=${opts.logLevel})`,
  );

  const login = await graphql<{ login: { accessToken: string } }>(
    graphqlUrl,
    'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
    { input: DEMO_CREDENTIALS },
  );
  const token = login.login.accessToken;
  gateway.child.watch = token;
  const listing = await graphql<{ heads: { nodes: { uuid: string }[] } }>(
    graphqlUrl,
    '{ heads(first: 100) { nodes { uuid } } }',
  );
  const headIds = listing.heads.nodes.map((n) => n.uuid);
  // The page cursors, walked once through the gateway (their format is the gateway's business).
  const cursors: string[] = [];
  for (let after: string | null = null; cursors.length < 50; ) {
    type Page = { heads: { pageInfo: { hasNextPage: boolean; endCursor: string | null } } };
    const page: Page = await graphql<Page>(
      graphqlUrl,
      'query($after: String) { heads(first: 20, after: $after) { pageInfo { hasNextPage endCursor } } }',
      { after },
    );
    if (!page.heads.pageInfo.hasNextPage || page.heads.pageInfo.endCursor === null) break;
    after = page.heads.pageInfo.endCursor;
    cursors.push(after);
  }

  const firstMemory = await readMemory(`${base}/metrics`, pid);
  const memorySource =
    firstMemory?.heapUsed !== undefined
      ? '/metrics'
      : firstMemory
        ? `/proc/${pid}/status (no /metrics: heap n/a)`
        : 'unavailable';
  console.log(
    `Gateway memory from ${memorySource}; idle RSS ${mb(firstMemory?.rss)}, heap ${mb(firstMemory?.heapUsed)}`,
  );

  let counters = newCounters();
  let interrupted = false;
  let current: { stop: () => void } | undefined;
  process.once('SIGINT', () => {
    interrupted = true;
    console.log('\nInterrupted: stopping the load…');
    current?.stop();
  });

  // Warm-up: same workload, not counted.
  if (opts.warmupSec > 0) {
    console.log(`Warm-up ${opts.warmupSec} s, ${opts.connections} connections…`);
    const warm = runLoad(
      graphqlUrl,
      opts.warmupSec,
      opts.connections,
      workload(token, headIds, cursors, () => counters),
      () => {},
      () => {},
    );
    current = warm;
    const result = await warm.done;
    console.log(
      `Warm-up: ${result.requests.total} requests, ${result.requests.average.toFixed(0)} req/s, ${result.non2xx} non-2xx, ${counters.graphqlErrors} GraphQL errors`,
    );
  }
  counters = newCounters();
  if (interrupted) {
    await stopAll();
    return 1;
  }

  const upstreamBefore = await getJson<{ total: number }>(
    `${upstreamUrl.replace(/\/v2$/, '')}/__reference/stats`,
  ).catch(() => undefined);
  const samples: Memory[] = [];
  const sample = async () => {
    const memory = await readMemory(`${base}/metrics`, pid);
    if (memory) samples.push(memory);
    return memory;
  };
  const startMemory = await sample();
  const started = performance.now();
  console.log(
    `Soak ${opts.durationSec} s, ${opts.connections} connections, report every ${opts.intervalSec} s. Start (after warm-up): RSS ${mb(startMemory?.rss)}, heap ${mb(startMemory?.heapUsed)}`,
  );
  console.log('  time   req/s  responses  non-2xx  gql-errors  socket-errors   heap used        RSS');

  let intervalResponses = 0;
  let lastReport = started;
  const sampler = setInterval(() => void sample(), SAMPLE_EVERY_MS);
  const reporter = setInterval(() => {
    void (async () => {
      const now = performance.now();
      const memory = samples.at(-1);
      const rate = intervalResponses / ((now - lastReport) / 1000);
      intervalResponses = 0;
      lastReport = now;
      const c = counters;
      console.log(
        `${`${Math.round((now - started) / 1000)}s`.padStart(6)} ${rate.toFixed(0).padStart(7)} ${String(c.responses).padStart(10)} ${String(c.non2xx).padStart(8)} ${String(c.graphqlErrors).padStart(11)} ${String(c.socketErrors).padStart(14)} ${mb(memory?.heapUsed).padStart(11)} ${mb(memory?.rss).padStart(10)}`,
      );
    })();
  }, opts.intervalSec * 1000);

  const load = runLoad(
    graphqlUrl,
    opts.durationSec,
    opts.connections,
    workload(token, headIds, cursors, () => counters),
    (status) => {
      counters.responses++;
      intervalResponses++;
      if (status < 200 || status >= 300) counters.non2xx++;
    },
    () => counters.socketErrors++,
  );
  current = load;
  // A gateway that dies mid-run ends the run: say so, with its last words.
  let died: string | undefined;
  let finished = false;
  gateway.child.process.once('exit', (code, signal) => {
    if (finished) return;
    died = `gateway exited (${signal ?? `code ${code}`}) after ${((performance.now() - started) / 1000).toFixed(1)} s`;
    console.log(`\n!!! ${died}; its last stderr/error lines:\n${gateway.child.tail.join('\n')}\n`);
    load.stop();
  });
  // Bounded whatever happens: autocannon stops itself at the duration; this is the backstop.
  const backstop = setTimeout(() => load.stop(), (opts.durationSec + 30) * 1000);
  const result = await load.done;
  finished = true;
  clearTimeout(backstop);
  clearInterval(reporter);
  clearInterval(sampler);
  const elapsedSec = (performance.now() - started) / 1000;
  const endMemory = await sample();
  const upstreamAfter = await getJson<{ total: number; inFlight: number }>(
    `${upstreamUrl.replace(/\/v2$/, '')}/__reference/stats`,
  ).catch(() => undefined);
  const gatewayLogLines = gateway.child.lines;
  const tokenInLogs = gateway.child.watchHits;
  const gatewayTail = gateway.child.tail.filter((line) => /"level":(50|60)/.test(line));
  await stopAll();

  // Memory, shown over a window at each end of the run (a fifth of it, at least one report
  // interval): RSS by its mean, heap used by its median. Both follow the heap's saw-tooth between
  // full collections, and after warm-up the heap can climb for half a minute before the first, so
  // their level at either end says nothing of a leak. Judged instead: RSS and the heap outside
  // the young generation just after full collections, at the first and the last of them, and
  // only in a run long enough and with enough of them (JUDGED_FROM_SECONDS, MIN_SETTLED_COMPARED).
  const window = Math.max(3, Math.round((Math.max(opts.intervalSec, opts.durationSec / 5) * 1000) / SAMPLE_EVERY_MS));
  const span = Math.min(window, Math.floor(samples.length / 2) || 1);
  const head = samples.slice(0, span);
  const tail = samples.slice(-span);
  const valuesOf = (of: Memory[], pick: (m: Memory) => number | undefined) =>
    of.map(pick).filter((v): v is number => v !== undefined);
  const avg = (of: Memory[], pick: (m: Memory) => number | undefined) =>
    valuesOf(of, pick).length ? mean(valuesOf(of, pick)) : undefined;
  const mid = (of: Memory[], pick: (m: Memory) => number | undefined) =>
    valuesOf(of, pick).length ? median(valuesOf(of, pick)) : undefined;
  const low = (of: Memory[], pick: (m: Memory) => number | undefined) =>
    valuesOf(of, pick).length ? Math.min(...valuesOf(of, pick)) : undefined;
  const rssStart = avg(head, (m) => m.rss);
  const rssEnd = avg(tail, (m) => m.rss);
  const heapStart = mid(head, (m) => m.heapUsed);
  const heapEnd = mid(tail, (m) => m.heapUsed);
  const change = (from: number | undefined, to: number | undefined) =>
    from === undefined || to === undefined ? undefined : ((to - from) / from) * 100;
  const rssChange = change(rssStart, rssEnd);
  const heapChange = change(heapStart, heapEnd);
  const afterFullGc = samples.filter((s, i) => {
    const before = samples[i - 1]?.fullGcs;
    return before !== undefined && s.fullGcs !== undefined && s.fullGcs > before;
  });
  const compared = Math.max(Math.min(5, Math.floor(afterFullGc.length / 2)), Math.floor(afterFullGc.length / 5));
  const judged = elapsedSec >= JUDGED_FROM_SECONDS && compared >= MIN_SETTLED_COMPARED;
  const firstGcs = afterFullGc.slice(0, compared);
  const lastGcs = afterFullGc.slice(-compared);
  const settled = {
    rss: [mid(firstGcs, (m) => m.rss), mid(lastGcs, (m) => m.rss)] as const,
    retained: [mid(firstGcs, (m) => m.retained), mid(lastGcs, (m) => m.retained)] as const,
  };
  const settledChanges = [change(...settled.rss), change(...settled.retained)];
  const flat = judged ? settledChanges.every((c) => c !== undefined && c <= opts.tolerancePct) : undefined;
  const heapSlope = slopePerMinute(samples, (m) => m.heapUsed);
  const rssSlope = slopePerMinute(samples, (m) => m.rss);
  const errors = counters.non2xx + counters.graphqlErrors + counters.socketErrors + result.timeouts;
  const pct = (c: number | undefined) => (c === undefined ? 'n/a' : `${c >= 0 ? '+' : ''}${c.toFixed(1)} %`);

  console.log('\n==== Soak summary ====');
  console.log(
    `Duration         ${elapsedSec.toFixed(1)} s measured (+ ${opts.warmupSec} s warm-up), ${opts.connections} connections`,
  );
  console.log(
    `Requests         ${result.requests.total} total, ${(counters.responses / elapsedSec).toFixed(0)} req/s (autocannon per-second average ${result.requests.average.toFixed(0)})`,
  );
  console.log(
    `By operation     ${Object.entries(counters.byQuery)
      .map(([name, n]) => `${name} ${n}`)
      .join(', ')}`,
  );
  console.log(
    `Latency          p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, max ${result.latency.max} ms`,
  );
  console.log(
    `Errors           ${errors} (non-2xx ${counters.non2xx}, GraphQL errors ${counters.graphqlErrors}, socket errors ${counters.socketErrors}, timeouts ${result.timeouts})`,
  );
  for (const line of counters.firstErrors) console.log(`                 e.g. ${line}`);
  if (upstreamBefore && upstreamAfter) {
    const calls = upstreamAfter.total - upstreamBefore.total;
    console.log(
      `Upstream         ${calls} calls (${(calls / Math.max(1, counters.responses)).toFixed(2)} per request), in flight at the end ${upstreamAfter.inFlight}`,
    );
  }
  console.log(
    `Gateway logs     ${gatewayLogLines} lines after start-up, token found in ${tokenInLogs}${gatewayTail.length ? `; error lines: ${gatewayTail.slice(-3).join(' | ')}` : ''}`,
  );
  console.log(
    `Memory (${memorySource.startsWith('/metrics') ? 'gateway /metrics' : memorySource}), first vs last ${head.length} samples (one every ${SAMPLE_EVERY_MS / 1000} s, ${samples.length} in all):`,
  );
  console.log(
    `  RSS (mean)         ${mb(rssStart)} → ${mb(rssEnd)} (${pct(rssChange)}); trend over the run ${rssSlope === undefined ? 'n/a' : `${mb(rssSlope)}/min`}`,
  );
  console.log(
    `  heap used (median) ${mb(heapStart)} → ${mb(heapEnd)} (${pct(heapChange)}); lowest ${mb(low(head, (m) => m.heapUsed))} → ${mb(low(tail, (m) => m.heapUsed))}; trend over the run ${heapSlope === undefined ? 'n/a' : `${mb(heapSlope)}/min`}`,
  );
  console.log(
    `  single samples     RSS ${mb(startMemory?.rss)} → ${mb(endMemory?.rss)}, heap ${mb(startMemory?.heapUsed)} → ${mb(endMemory?.heapUsed)}`,
  );
  if (judged) {
    console.log(
      `  after a full GC    median of the first and last ${compared} of the ${afterFullGc.length} samples that followed a full collection:`,
    );
    console.log(`    RSS              ${mb(settled.rss[0])} → ${mb(settled.rss[1])} (${pct(settledChanges[0])})`);
    console.log(
      `    heap, old gen.   ${mb(settled.retained[0])} → ${mb(settled.retained[1])} (${pct(settledChanges[1])}) (heap used outside the young generation)`,
    );
  }
  if (flat === undefined) {
    const why =
      elapsedSec < JUDGED_FROM_SECONDS
        ? `a run of ${elapsedSec.toFixed(0)} s: memory is judged from ${JUDGED_FROM_SECONDS} s on, e.g. the default --minutes 3`
        : memorySource !== '/metrics'
          ? 'no GC counts without /metrics'
          : `${afterFullGc.length} samples after a full collection, ${2 * MIN_SETTLED_COMPARED} needed`;
    console.log(`Memory flat      not judged (${why})`);
  } else {
    console.log(
      `Memory flat      ${flat ? 'yes' : 'NO'} (RSS and the heap after full collections, tolerance ${opts.tolerancePct} %)`,
    );
  }
  if (died) console.log(`Gateway          ${died}`);
  const ok = errors === 0 && flat !== false && tokenInLogs === 0 && !interrupted && died === undefined;
  console.log(`Verdict          ${ok ? 'OK' : 'NOT OK'}${ok && flat === undefined ? ' (memory not judged)' : ''}`);
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  async (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    await stopAll();
    process.exit(2);
  },
);
