import { type ChildProcess, spawn } from 'node:child_process';
import { type ClientRequest, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { startReferenceUpstream } from '../src/reference-upstream/server.js';

/*
 * `npx tsx scripts/measure-real-time.ts [--checkout DIR …]`
 *
 * Not a test: what a write costs real time, for each built checkout named (default: this one;
 * `npm run build` first), its gateway (`DIR/dist/main.js`) in a process of its own in front of the
 * reference upstream (in this process, which counts its calls). Two scenarios, each on a fresh
 * gateway:
 * - fan-out: 444 live queries `heads(first: 5)` (each its own token and address), then one write
 *   to a head on their page: upstream calls and gateway CPU until every one was sent again (or
 *   20 s), bytes sent to them, and another caller's latency (p50, p99) for reads sent meanwhile;
 *   then the same with the 444 sharing one token (coalesced);
 * - silence: 500 live queries under the default shedding cap, two writes a second apart: how many
 *   were sent the second write (a live query a refused re-run silenced gets nothing more).
 * The machine may be shared: read the figures side by side, taken in one run.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const checkouts = process.argv.flatMap((arg, i) => (process.argv[i - 1] === '--checkout' ? [arg] : []));
if (checkouts.length === 0) checkouts.push(root);

const PAGE = 'query Page @live { heads(first: 5) { nodes { id name url style version lod } } }';
const UPDATE = 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { id } } }';

async function gateway(
  checkout: string,
  upstream: string,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: checkout,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'warn', UPSTREAM_URL: upstream, TRUST_PROXY: '1', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /Gateway listening on (\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  return { child, url };
}

async function post(
  url: string,
  body: object,
  headers: Record<string, string> = {},
): Promise<{ ms: number; body: { data?: any; errors?: any[] } }> {
  const started = performance.now();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { body: (await response.json()) as { data?: any; errors?: any[] }, ms: performance.now() - started };
}

const cpuSeconds = async (url: string) =>
  Number(
    /^process_cpu_seconds_total (\S+)$/m.exec(await (await fetch(url.replace(/\/graphql$/, '/metrics'))).text())?.[1] ??
      Number.NaN,
  );

/** A live query over SSE by hand: its results counted, the bytes it was sent. */
function live(url: string, headers: Record<string, string>) {
  const state = { results: 0, bytes: 0, stream: undefined as ClientRequest | undefined };
  state.stream = request(
    url,
    {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    },
    (response) => {
      response.on('data', (chunk: Buffer) => {
        state.bytes += chunk.byteLength;
        state.results += chunk.toString().split('event: next').length - 1;
      });
    },
  );
  state.stream.end(JSON.stringify({ query: PAGE }));
  return state;
}

async function until(condition: () => boolean, limitMs: number): Promise<boolean> {
  const giveUp = performance.now() + limitMs;
  while (!condition()) {
    if (performance.now() > giveUp) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

const percentile = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]!;

async function fanOut(checkout: string, sharedToken: boolean) {
  const reference = await startReferenceUpstream();
  const { child, url } = await gateway(checkout, reference.url, { SUBSCRIPTIONS_MAX: '100000' });
  try {
    const views = Array.from({ length: 444 }, (_, i) =>
      live(url, {
        authorization: sharedToken ? 'Bearer one-caller' : `Bearer live-${i}`,
        'x-forwarded-for': `10.${Math.floor(i / 250)}.${i % 250}.1`,
      }),
    );
    await until(() => views.every((view) => view.results >= 1), 30_000);
    const onPage = (await post(url, { query: '{ heads(first: 5) { nodes { id } } }' })).body.data.heads.nodes.map(
      (node: { id: string }) => node.id,
    ) as string[];
    // Every call but the other caller's reads (Get Head by ID): the live queries' re-runs, the write.
    const calls = () =>
      Object.entries(reference.countsByOperation()).reduce(
        (sum, [operation, count]) => (operation === 'getHeadById' ? sum : sum + count),
        0,
      );
    const write = async (n: number) => {
      const started = performance.now();
      await post(
        url,
        { query: UPDATE, variables: { i: { id: onPage[0], name: `fan-out ${n} ${Date.now()}` } } },
        { 'x-forwarded-for': '10.9.9.9' },
      );
      const all = await until(() => views.every((view) => view.results >= n + 1), 20_000);
      return all
        ? `yes, in ${Math.round(performance.now() - started)} ms`
        : `no: ${views.filter((view) => view.results >= n + 1).length} of 444 in 20 s`;
    };
    // The first write alone: what its fan-out costs.
    const [before, cpu, bytes] = [calls(), await cpuSeconds(url), views.reduce((sum, view) => sum + view.bytes, 0)];
    const sent = await write(1);
    const figures = {
      'every live query sent again': sent,
      'upstream calls (the write and the re-runs)': calls() - before,
      'gateway CPU (s)': Number(((await cpuSeconds(url)) - cpu).toFixed(2)),
      'KB to the live queries': Math.round((views.reduce((sum, view) => sum + view.bytes, 0) - bytes) / 1024),
    };
    // The second, with another caller's reads meanwhile (ten at a time), until every live query had it.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const latencies: number[] = [];
    let reading = true;
    const reader = (async () => {
      while (reading)
        latencies.push(
          ...(
            await Promise.all(
              Array.from({ length: 10 }, () =>
                post(
                  url,
                  { query: 'query($id: ID!) { head(id: $id) { name } }', variables: { id: onPage[1] } },
                  { 'x-forwarded-for': '10.8.8.8' },
                ),
              ),
            )
          ).map((answer) => answer.ms),
        );
    })();
    await write(2);
    reading = false;
    await reader;
    for (const view of views) view.stream?.destroy();
    return {
      ...figures,
      "another caller's reads meanwhile": latencies.length,
      'their p50, p99 (ms)': [Math.round(percentile(latencies, 50)), Math.round(percentile(latencies, 99))],
    };
  } finally {
    child.kill('SIGKILL');
    await reference.close();
  }
}

async function silence(checkout: string) {
  const reference = await startReferenceUpstream();
  const { child, url } = await gateway(checkout, reference.url, {
    SUBSCRIPTIONS_MAX: '100000',
    SUBSCRIPTION_LIVE_THROTTLE_MS: '0',
  });
  try {
    const views = Array.from({ length: 500 }, (_, i) =>
      live(url, { authorization: `Bearer quiet-${i}`, 'x-forwarded-for': `10.${Math.floor(i / 250)}.${i % 250}.2` }),
    );
    await until(() => views.every((view) => view.results >= 1), 30_000);
    const onPage = (await post(url, { query: '{ heads(first: 5) { nodes { id } } }' })).body.data.heads.nodes.map(
      (node: { id: string }) => node.id,
    ) as string[];
    await post(
      url,
      { query: UPDATE, variables: { i: { id: onPage[0], name: `first write ${Date.now()}` } } },
      { 'x-forwarded-for': '10.9.9.9' },
    );
    await until(() => views.every((view) => view.results >= 2), 20_000);
    const afterFirst = views.map((view) => view.results);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await post(
      url,
      { query: UPDATE, variables: { i: { id: onPage[0], name: `second write ${Date.now()}` } } },
      { 'x-forwarded-for': '10.9.9.9' },
    );
    await until(() => views.every((view, i) => view.results > afterFirst[i]!), 20_000);
    for (const view of views) view.stream?.destroy();
    return {
      'live queries sent the second write': `${views.filter((view, i) => view.results > afterFirst[i]!).length} of 500`,
    };
  } finally {
    child.kill('SIGKILL');
    await reference.close();
  }
}

for (const checkout of checkouts) {
  console.log(`\n${checkout}`);
  console.log('fan-out, 444 tokens:', await fanOut(checkout, false));
  console.log('fan-out, one token:', await fanOut(checkout, true));
  console.log('silence:', await silence(checkout));
}
process.exit(0);
