import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';

/*
 * `npx tsx scripts/measure-caller-limits.ts [seconds per phase, default 5]`
 *
 * Not a test: what one caller gets with each per-caller limit set, and what another caller's
 * latency is meanwhile, on loopback. The reference upstream (RECORD=0) and, per scenario, a
 * gateway (`src/main.ts`) run as child processes on ephemeral 127.0.0.1 ports. Per scenario:
 * caller B alone sends `{ head(id) { name } }` ten times a second for a phase (its
 * baseline), then again while caller A (another token) attacks from many concurrent loops. Printed:
 * A's answered operations a second (HTTP 200 without errors), A's refusals a second, the upstream
 * calls a second (the reference's own count, B's excluded), B's median and p95 latency beside A
 * and their ratio to B alone. The machine may be shared: read the ratios, not the milliseconds.
 */

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * Caller A runs in a process of its own (this script with `--attacker`): in the measuring
 * process its loops would hold up the event loop that times caller B.
 */
if (process.argv[2] === '--attacker') {
  const [, , , url, attack, loops, ms, idsJson] = process.argv;
  const target = new URL(url!);
  const pool = new Pool(target.origin, { connections: Number(loops), pipelining: 1 });
  const ids = JSON.parse(idsJson!) as string[];
  const bodies = {
    nodes50: () => ({ query: 'query($ids: [ID!]!) { nodes(ids: $ids) { id } }', variables: { ids } }),
    login: () => ({
      query: 'mutation($i: LoginInput!) { login(input: $i) { accessToken } }',
      variables: { i: { username: 'demo', password: `guess-${Math.random()}` } },
    }),
    slow: () => ({ query: '{ heads(first: 2) { totalCount } }' }),
  } as const;
  const until = performance.now() + Number(ms);
  let served = 0;
  let refused = 0;
  await Promise.all(
    Array.from({ length: Number(loops) }, async () => {
      while (performance.now() < until) {
        const response = await pool.request({
          path: target.pathname,
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer caller-a' },
          body: JSON.stringify(bodies[attack as keyof typeof bodies]()),
        });
        const body = (await response.body.json()) as { errors?: unknown[] };
        if (response.statusCode === 429) refused++;
        // A guess answered by the upstream (UNAUTHENTICATED) is a guess served.
        else if (response.statusCode === 200 && (body.errors === undefined || attack === 'login')) served++;
      }
    }),
  );
  process.stdout.write(JSON.stringify({ served, refused }));
  await pool.close();
  process.exit(0);
}

const seconds = Number(process.argv[2] ?? 5);

function start(
  script: string,
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = ready.exec(out);
      if (match) resolve({ child, url: match[1]! });
    });
    child.once('exit', (code) => reject(new Error(`${script} exited ${code}: ${out}`)));
  });
}

const upstream = await start('src/reference-upstream/main.ts', { PORT: '0', RECORD: '0' }, /listening on (\S+)/);
const admin = new Pool(new URL(upstream.url).origin, { connections: 2 });
const stats = async () =>
  (await (await admin.request({ path: '/__reference/stats', method: 'GET' })).body.json()) as {
    total: number;
    maxInFlight: number;
  };
const adminPost = async (path: string, body?: unknown) =>
  void (await (
    await admin.request({
      path,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  ).body.dump());

interface Scenario {
  readonly name: string;
  readonly env: Record<string, string>;
  readonly attack: 'nodes50' | 'login' | 'slow';
  readonly loops: number;
}

const scenarios: Scenario[] = [
  { name: 'no limit', env: {}, attack: 'nodes50', loops: 16 },
  {
    name: 'RATE_LIMIT_REQUESTS_PER_SECOND=20',
    env: { RATE_LIMIT_REQUESTS_PER_SECOND: '20' },
    attack: 'nodes50',
    loops: 16,
  },
  { name: 'no limit', env: {}, attack: 'login', loops: 16 },
  {
    name: 'RATE_LIMIT_REQUESTS_PER_SECOND=20',
    env: { RATE_LIMIT_REQUESTS_PER_SECOND: '20' },
    attack: 'login',
    loops: 16,
  },
  {
    name: 'RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND=100',
    env: { RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '100' },
    attack: 'nodes50',
    loops: 16,
  },
  { name: 'no limit', env: {}, attack: 'slow', loops: 150 },
  { name: 'RATE_LIMIT_IN_FLIGHT=4', env: { RATE_LIMIT_IN_FLIGHT: '4' }, attack: 'slow', loops: 150 },
];

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * p))] ?? NaN;

const children: ChildProcess[] = [upstream.child];
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

for (const scenario of scenarios) {
  const gateway = await start(
    'src/main.ts',
    { PORT: '0', UPSTREAM_URL: upstream.url, ...scenario.env },
    /Gateway listening on (\S+)/,
  );
  children.push(gateway.child);
  const endpoint = new URL(gateway.url);
  const pool = new Pool(endpoint.origin, { connections: scenario.loops + 4, pipelining: 1 });
  const post = async (query: string, token: string, variables?: unknown) => {
    const response = await pool.request({
      path: endpoint.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.body.json()) as { errors?: { extensions?: { code?: string } }[] };
    return { status: response.statusCode, code: body.errors?.[0]?.extensions?.code };
  };
  const headIds = await (async () => {
    const page = await pool.request({
      path: endpoint.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ heads(first: 50) { nodes { uuid } } }' }),
    });
    return ((await page.body.json()) as any).data.heads.nodes.map((n: { uuid: string }) => n.uuid) as string[];
  })();
  // Caller B signs in through the gateway, whose login makes its token known to be real: a caller
  // of its own, though it shares the attacker's address (the attacker's made-up token is that address's).
  const callerB = await (async () => {
    const login = await pool.request({
      path: endpoint.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
        variables: { input: DEMO_CREDENTIALS },
      }),
    });
    return ((await login.body.json()) as { data: { login: { accessToken: string } } }).data.login.accessToken;
  })();
  const probeB = async (until: number) => {
    const latencies: number[] = [];
    while (performance.now() < until) {
      const started = performance.now();
      // A read of its own (getHeadById): the slow scenario slows the listings only.
      const answer = await post(`{ head(id: "${headIds[0]}") { name } }`, callerB);
      if (answer.status !== 200 || answer.code !== undefined)
        throw new Error(`caller B refused: ${answer.status} ${answer.code}`);
      latencies.push(performance.now() - started);
      // Ten a second: a caller well within every limit measured here.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 100 - (performance.now() - started))));
    }
    return latencies;
  };

  // Warm up, then B alone.
  await probeB(performance.now() + 1_000);
  const alone = await probeB(performance.now() + seconds * 1_000);

  if (scenario.attack === 'slow')
    await adminPost('/__reference/faults', {
      operation: 'listHeads',
      fault: { kind: 'latency', ms: 1_000 },
      times: 1_000_000,
    });
  await adminPost('/__reference/reset');
  const before = await stats();
  const attacker = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      fileURLToPath(import.meta.url),
      '--attacker',
      gateway.url,
      scenario.attack,
      String(scenario.loops),
      String(seconds * 1_000),
      JSON.stringify(headIds),
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  children.push(attacker);
  let report = '';
  attacker.stdout!.on('data', (chunk: Buffer) => (report += chunk.toString()));
  const attackDone = new Promise<{ served: number; refused: number }>((resolve) =>
    attacker.once('exit', () => resolve(JSON.parse(report))),
  );
  // B starts once A runs (A's process takes a moment to start), for the same length of time.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  const until = performance.now() + (seconds * 1_000 - 2_000);
  const beside = await probeB(until);
  const { served, refused } = await attackDone;
  const after = await stats();
  await admin.request({ path: '/__reference/faults', method: 'DELETE' }).then((r) => r.body.dump());
  const upstreamCalls = after.total - before.total - beside.length;
  const line = [
    scenario.name.padEnd(42),
    scenario.attack.padEnd(8),
    `A answered ${(served / seconds).toFixed(1)}/s`,
    `refused ${(refused / seconds).toFixed(0)}/s`,
    `upstream calls ${(upstreamCalls / seconds).toFixed(0)}/s (peak in flight ${after.maxInFlight})`,
    `B alone p50 ${percentile(alone, 0.5).toFixed(1)} ms`,
    `beside A p50 ${percentile(beside, 0.5).toFixed(1)} ms (x${(percentile(beside, 0.5) / percentile(alone, 0.5)).toFixed(2)} of alone), p95 x${(percentile(beside, 0.95) / percentile(alone, 0.95)).toFixed(2)}`,
  ].join(' | ');
  process.stdout.write(`${line}\n`);
  await pool.close();
  gateway.child.kill('SIGINT');
  await new Promise((resolve) => gateway.child.once('exit', resolve));
}

await admin.close();
upstream.child.kill('SIGTERM');
