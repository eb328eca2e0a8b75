import { type ChildProcess, execFileSync, type StdioOptions, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Fixtures, HttpRequest } from './scenarios.js';

/*
 * The benches' child processes (the reference upstream, gateways, autocannon, A/B workers): started
 * pinned to a CPU where taskset is there, stopped with SIGINT, killed when the bench exits.
 */

export const root = fileURLToPath(new URL('..', import.meta.url));
export const HOST = '127.0.0.1';
const START_TIMEOUT_MS = 30_000;
const FETCH_TIMEOUT_MS = 10_000;

export interface Child {
  readonly name: string;
  readonly process: ChildProcess;
  /** Output lines seen after the ready line, and the first few of them. */
  lines: number;
  readonly samples: string[];
  readonly tail: string[];
}

export const children = new Set<Child>();
export const pinning = existsSync('/usr/bin/taskset') && availableParallelism() >= 2;

/**
 * `node <args>`, pinned to `cpu` when there is one and taskset is there, and with at most
 * `openFiles` descriptors when given (prlimit, soft and hard: Node raises a soft limit to the hard one).
 */
export function spawnNode(
  args: string[],
  cpu: number | undefined,
  env: Record<string, string>,
  stdio: StdioOptions = ['ignore', 'pipe', 'pipe'],
  openFiles?: number,
): ChildProcess {
  const node =
    openFiles === undefined
      ? [process.execPath, ...args]
      : ['/usr/bin/prlimit', `--nofile=${openFiles}:${openFiles}`, '--', process.execPath, ...args];
  const [command, ...argv] = pinning && cpu !== undefined ? ['/usr/bin/taskset', '-c', String(cpu), ...node] : node;
  return spawn(command!, argv, { cwd: root, env: { ...process.env, ...env }, stdio });
}

/**
 * The gateway as `npm start` runs it on the embedded reference upstream (UPSTREAM_URL unset, so
 * not production), built first and in one process (its /metrics is the serving one's): what the
 * memory and attack scripts measure.
 */
export async function startBuiltGateway(): Promise<{ child: Child; url: string }> {
  console.log('Building (npm run build), as npm start does…');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit', timeout: 180_000 });
  return startServer('gateway', [...startFlags(), 'dist/main.js'], undefined, {
    UPSTREAM_URL: '',
    NODE_ENV: 'development',
    PORT: '0',
    HOST,
    WORKERS: '1',
    LOG_LEVEL: 'warn',
  });
}

/** Starts a server process and resolves with the URL from its ready line (`... listening on <url>`). */
export function startServer(
  name: string,
  args: string[],
  cpu: number | undefined,
  env: Record<string, string>,
  openFiles?: number,
): Promise<{ child: Child; url: string }> {
  const child: Child = {
    name,
    process: spawnNode(args, cpu, env, undefined, openFiles),
    lines: 0,
    samples: [],
    tail: [],
  };
  children.add(child);
  child.process.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    let ready = false;
    const fail = (why: string) => {
      if (ready) return;
      ready = true;
      clearTimeout(timer);
      reject(new Error(`${name}: ${why}\n${child.tail.join('\n')}`));
    };
    const timer = setTimeout(
      () => fail(`no "listening on" line within ${START_TIMEOUT_MS / 1000} s`),
      START_TIMEOUT_MS,
    );
    const onLine = (line: string) => {
      child.tail.push(line);
      if (child.tail.length > 20) child.tail.shift();
      const match = / listening on (\S+)/.exec(line);
      if (!ready && match) {
        ready = true;
        clearTimeout(timer);
        resolve({ child, url: match[1]! });
      } else if (ready && ++child.lines <= 3) {
        child.samples.push(line.slice(0, 300));
      }
    };
    createInterface({ input: child.process.stdout! }).on('line', onLine);
    createInterface({ input: child.process.stderr! }).on('line', onLine);
    child.process.once('error', (error) => fail(error.message));
    child.process.once('exit', (code, signal) => fail(`exited early (${signal ?? code})`));
  });
}

/**
 * SIGINT (the servers exit cleanly on it, a WORKERS=N gateway with its workers; a gateway drains
 * at once, where SIGTERM would first keep serving for SHUTDOWN_DELAY_MS), SIGKILL after 5 s.
 */
export function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGINT');
  });
}

export async function stopAll(): Promise<void> {
  await Promise.all([...children].map(({ process: child }) => stop(child)));
}

process.on('exit', () => {
  for (const { process: child } of children) child.kill('SIGKILL');
});
let interrupted = false;
/** Whether Ctrl-C (or SIGTERM) stopped the run: its children are being stopped, the run's failure is expected. */
export const wasInterrupted = (): boolean => interrupted;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    interrupted = true;
    console.error(`\n${signal}: stopping the child processes`);
    void stopAll().finally(() => process.exit(130));
  });
}

// ---- load ----

export interface AutocannonResult {
  /** `sent` includes the requests still in flight when the run stopped (their upstream calls were counted). */
  requests: { average: number; total: number; sent: number };
  latency: { p50: number; p99: number };
  non2xx: number;
  errors: number;
  timeouts: number;
  /** Seconds the run lasted, as autocannon measured it. */
  duration: number;
}

/**
 * Runs autocannon's CLI in its own process (pinned to CPU 1 with the upstream); `extraArgs` go to
 * it as they are (e.g. `--overallRate 1000` for a fixed rate).
 */
export function autocannon(
  url: string,
  request: HttpRequest,
  seconds: number,
  connections: number,
  extraArgs: readonly string[] = [],
): Promise<AutocannonResult> {
  const args: string[] = [
    join(root, 'node_modules/autocannon/autocannon.js'),
    '--json',
    '-c',
    String(connections),
    '-d',
    String(seconds),
    '-m',
    request.method,
    ...extraArgs,
  ];
  for (const [name, value] of Object.entries(request.headers)) args.push('-H', `${name}=${value}`);
  if (request.body !== undefined) args.push('-b', request.body);
  args.push(url);
  return resultOfChild('autocannon', args, {}, (seconds + 30) * 1000);
}

/**
 * Runs `args` in a Node process of its own, pinned to CPU 1 (with the upstream: the measured process keeps CPU 0), and
 * resolves to the JSON of its last line of output; it is killed after `killAfterMs`.
 */
export function resultOfChild<T>(
  name: string,
  args: string[],
  env: Record<string, string>,
  killAfterMs = 600_000,
): Promise<T> {
  const child = spawnNode(args, 1, env);
  const tracked: Child = { name, process: child, lines: 0, samples: [], tail: [] };
  children.add(tracked);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2_000)));
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      children.delete(tracked);
      const last = stdout.trim().split('\n').pop() ?? '';
      if (code !== 0 || !last.startsWith('{'))
        return reject(new Error(`${name} exited ${signal ?? code}: ${stderr || stdout}`));
      resolve(JSON.parse(last) as T);
    });
  });
}

// ---- HTTP helpers ----

export async function http(url: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  return { status: response.status, text: await response.text() };
}

export async function fixtures(upstreamUrl: string): Promise<Fixtures> {
  const login = await http(`${upstreamUrl}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'username=demo&password=demo-password&grant_type=password',
  });
  if (login.status !== 200) throw new Error(`login: HTTP ${login.status} ${login.text}`);
  const list = await http(`${upstreamUrl}/heads?size=1`);
  if (list.status !== 200) throw new Error(`list heads: HTTP ${list.status} ${list.text}`);
  const headId = (JSON.parse(list.text) as { items: { id: string }[] }).items[0]?.id;
  if (headId === undefined) throw new Error('list heads: no head in the upstream');
  return { token: (JSON.parse(login.text) as { access_token: string }).access_token, headId };
}

/**
 * The node flags `npm start` gives the gateway (package.json), so the bench measures the process
 * as deployed: the heap sizing there is part of the memory figures.
 */
export function startFlags(): string[] {
  const start = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts
    .start;
  const flags = /\bnode((?:\s+--\S+)*)\s+dist\/main\.js/.exec(start)?.[1];
  if (flags === undefined)
    throw new Error(`package.json scripts.start does not run "node [--flags] dist/main.js": ${start}`);
  return flags.split(/\s+/).filter(Boolean);
}

/** The value of the first sample of `name` in a Prometheus text exposition. */
export function metricValue(text: string, name: string): number | undefined {
  const value = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1];
  return value === undefined ? undefined : Number(value);
}

/**
 * A gateway's heap used and RSS, and the longest its event loop was held since the last scrape
 * (prom-client's default metrics: the loop's delay histogram is reset at every scrape), from its /metrics.
 */
export async function gatewayMemory(
  gatewayUrl: string,
): Promise<{ heapUsed: number; rss: number; loopStall: number } | undefined> {
  const { status, text } = await http(new URL('/metrics', gatewayUrl).href);
  const heapUsed = metricValue(text, 'nodejs_heap_size_used_bytes');
  const rss = metricValue(text, 'process_resident_memory_bytes');
  const loopStall = metricValue(text, 'nodejs_eventloop_lag_max_seconds') ?? 0;
  return status === 200 && heapUsed !== undefined && rss !== undefined ? { heapUsed, rss, loopStall } : undefined;
}

/**
 * Where a checkout's build holds a module: in the server's folders by concern (`dist/server/<folder>/<file>`,
 * since issue 32), in `dist/server/<file>` (the layered tree of issue 24), else `dist/<file>`.
 */
export function builtModule(checkout: string, file: string): string {
  const server = join(checkout, 'dist', 'server');
  const candidates = [
    join(server, file),
    ...(existsSync(server)
      ? readdirSync(server, { withFileTypes: true })
          .filter((entry) => entry.isDirectory())
          .map((entry) => join(server, entry.name, file))
      : []),
  ];
  return candidates.find((path) => existsSync(path)) ?? join(checkout, 'dist', file);
}
