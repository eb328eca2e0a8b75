import { parseArgs } from 'node:util';
import { exitWithHelp, integerOption, runBench } from '../bench/cli.js';
import { gatewayMemory, startBuiltGateway } from '../bench/processes.js';
import { loadConfig } from '../src/config.js';

/*
 * `npm run attack:validation` (`npm run memory`'s sibling): whether documents within every limit
 * can hold the gateway's event loop through validation. Builds and starts the gateway as
 * `npm start` does (one process, the embedded reference upstream), then for each phase runs
 * connections sending one kind of batch in a loop while another caller sends `{ __typename }` one
 * after the other, and reports the longest the gateway's event loop was held (its own event-loop
 * delay metric, sampled every 250 ms), that caller's latency (median, p99) and what the batches
 * were answered. Each phase runs twice: with one connection, where the loop's longest hold is
 * what one batch holds it; then with `--connections`, where several batches are read in one turn
 * of the loop and the other caller queues behind them (the issue's figure: its median):
 *  - alone: no batches, the baseline;
 *  - attack: the hardening issue's attack, MAX_BATCH distinct documents each spreading 135
 *    fragments side by side on one type (9,045 pairs of fragments to compare each);
 *  - allowed: the most MAX_FRAGMENT_PAIRS lets through, one document of as many fragments side by
 *    side as its pairs allow, and a batch of MAX_BATCH documents sharing them.
 * Exit 0 when no single batch holds the event loop over `--bound` ms, 1 if one does.
 */

const usage = `Usage: npm run attack:validation -- [--seconds 8] [--connections 4] [--bound 100]
  --seconds      length of each phase
  --connections  connections sending batches at once, in each phase's second run
  --bound        ms one batch may hold the event loop`;

function options() {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '8' },
      connections: { type: 'string', default: '4' },
      bound: { type: 'string', default: '100' },
      help: { type: 'boolean' },
    },
  });
  exitWithHelp(values.help, usage);
  return {
    seconds: integerOption('seconds', values.seconds, 1, 600),
    connections: integerOption('connections', values.connections, 1, 64),
    boundMs: integerOption('bound', values.bound, 1, 60_000),
  };
}

/**
 * One document: a field whose selection spreads `spreads` distinct fragments on the same type (short names: ten fit in
 * MAX_BODY_BYTES).
 */
function spreadDocument(spreads: number, seed: string): string {
  const fields = ['name', 'url', 'createdAt'];
  const fragments = Array.from({ length: spreads }, (_, i) => `fragment F${seed}_${i} on Head { ${fields[i % 3]} }`);
  return `query Q${seed} { heads(first: 1) { nodes { ${fragments.map((_, i) => `...F${seed}_${i}`).join(' ')} } } }\n${fragments.join('\n')}`;
}

/** The most fragments one selection set may merge within `pairs`. */
const spreadsWithin = (pairs: number) => Math.floor((1 + Math.sqrt(1 + 8 * pairs)) / 2);

const percentile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;

async function phase(
  url: string,
  name: string,
  batches: (() => string) | undefined,
  opts: ReturnType<typeof options>,
  connections = opts.connections,
): Promise<boolean> {
  await gatewayMemory(url); // resets the loop's delay histogram
  const until = Date.now() + opts.seconds * 1_000;
  let held = 0;
  const sampler = setInterval(
    () => void gatewayMemory(url).then((sample) => (held = Math.max(held, (sample?.loopStall ?? 0) * 1_000))),
    250,
  );
  const answered = new Map<string, number>();
  const attackers = Array.from({ length: batches === undefined ? 0 : connections }, async () => {
    while (Date.now() < until) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: batches!(),
      }).catch(() => undefined);
      type Answer = { data?: unknown; errors?: { extensions?: { code?: string } }[] };
      const body = response === undefined ? undefined : ((await response.json()) as Answer[] | Answer);
      // A batch refused whole (its body too large) is one answer, not an array.
      for (const answer of body === undefined
        ? [{ errors: [{ extensions: { code: 'no answer' } }] }]
        : Array.isArray(body)
          ? body
          : [body]) {
        const outcome = answer.errors?.[0]?.extensions?.code ?? (answer.data === undefined ? 'none' : 'data');
        answered.set(outcome, (answered.get(outcome) ?? 0) + 1);
      }
    }
  });
  const latencies: number[] = [];
  while (Date.now() < until) {
    const started = performance.now();
    await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"query":"{ __typename }"}',
    }).then((r) => r.text());
    latencies.push(performance.now() - started);
  }
  await Promise.all(attackers);
  clearInterval(sampler);
  held = Math.max(held, ((await gatewayMemory(url))?.loopStall ?? 0) * 1_000);
  latencies.sort((a, b) => a - b);
  const ok = connections > 1 || held <= opts.boundMs;
  const answers = [...answered].map(([outcome, count]) => `${count} ${outcome}`).join(', ') || 'none sent';
  console.log(
    `${name}, ${batches === undefined ? 'no batches' : `${connections} connection(s)`}: event loop held at most ${held.toFixed(0)} ms${connections > 1 ? '' : ok ? ' OK' : ' NOT OK'}; { __typename }: median ${percentile(latencies, 0.5).toFixed(1)} ms, p99 ${percentile(latencies, 0.99).toFixed(1)} ms (${latencies.length} requests); batches' operations: ${answers}`,
  );
  return ok;
}

async function main(): Promise<void> {
  const opts = options();
  const config = loadConfig();
  const { url } = await startBuiltGateway();
  const endpoint = url.endsWith('/graphql') ? url : `${url}/graphql`;
  const batchOf = (documents: string[]) => JSON.stringify(documents.map((query) => ({ query })));
  let round = 0;
  // Distinct documents each time, as the attack sent them: nothing of one batch is cached for the next.
  const attack = () =>
    batchOf(Array.from({ length: config.maxBatch }, (_, i) => spreadDocument(135, `a${round++}_${i}`)));
  const single = spreadsWithin(config.limits.maxFragmentPairs);
  const shared = spreadsWithin(Math.floor(config.limits.maxFragmentPairs / config.maxBatch));
  const allowed = () =>
    round++ % 2 === 0
      ? batchOf([spreadDocument(single, `s${round}`)])
      : batchOf(Array.from({ length: config.maxBatch }, (_, i) => spreadDocument(shared, `b${round}_${i}`)));
  console.log(
    `Gateway ${url}; MAX_FRAGMENT_PAIRS=${config.limits.maxFragmentPairs}, MAX_BATCH=${config.maxBatch}; ${opts.connections} connections, ${opts.seconds} s a phase`,
  );
  await phase(endpoint, 'warm-up', allowed, { ...opts, seconds: 2, boundMs: Number.POSITIVE_INFINITY });
  const allowedName = `allowed (one of ${single} fragments, or ${config.maxBatch} of ${shared})`;
  const results = [
    await phase(endpoint, 'alone', undefined, opts),
    await phase(endpoint, 'attack', attack, opts, 1),
    await phase(endpoint, 'attack', attack, opts),
    await phase(endpoint, allowedName, allowed, opts, 1),
    await phase(endpoint, allowedName, allowed, opts),
  ];
  const ok = results.every(Boolean);
  console.log(`Verdict: ${ok ? 'OK' : 'NOT OK'}`);
  if (!ok) process.exitCode = 1;
}

await runBench(main, usage);
