import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { exitWithHelp, integerOption, runBench } from '../bench/cli.js';
import { gatewayMemory, HOST, http, root, startFlags, startServer } from '../bench/processes.js';
import { loadConfig } from '../src/config.js';

/*
 * `npm run memory`: whether one client, within every configured limit, can grow the gateway's
 * memory. Builds and starts the gateway as `npm start` does (node flags of package.json, the
 * embedded reference upstream, one process), then:
 *  1. documents: thousands of distinct large documents (~190 field selections each), each sent
 *     several times, so that every cache keyed by document (parse, validation, plan, compiled
 *     execution) sees each of them hot;
 *  2. batches: MAX_BATCH operations of the heaviest shape the limits let through (MAX_ALIASES
 *     aliases of `heads(first: 100)` selecting every field), reporting whatever answers come back.
 * Heap used and RSS are read from the gateway's /metrics every SAMPLE_MS all along. Heap used is
 * a saw-tooth between collections: a phase is judged on the median of the samples of a settling
 * window after it (light traffic only), never on one sample. Exit 0 when both stay within their
 * bounds, 1 when not (or when the run fails), 2 on a usage problem. The gateway takes the caller's
 * environment (e.g. COMPILED_EXECUTION=off npm run memory).
 */

const usage = `Usage: npm run memory -- [--documents 2000] [--repeats 3] [--batches 5] [--concurrency 4] [--heap-bound 150] [--rss-bound 300] [--settle 10]
  --documents    distinct documents sent (~190 field selections each)
  --repeats      times each document is sent
  --batches      batches of MAX_BATCH heaviest operations sent, one after the other
  --heap-bound   MB the heap used may grow, start to after the documents (medians of settled samples)
  --rss-bound    MB the RSS may grow, start to its peak during the batches
  --settle       seconds of light traffic sampled before and after each phase`;

const SAMPLE_MS = 250;

/** Every field of a head, its hair and the hair's price: 28 selections. */
const HEAD_FIELDS = 'id uuid name url arUrl outputFormat style version lod headMetadata createdAt updatedAt hair { id name url thumbnailUrl style createdAt sourceType gender objMetadata payableData { price description } updatedAt hairMetadata userId }';
const CONNECTION_FIELDS = `totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor } nodes { ${HEAD_FIELDS} }`;

/** Document `n`: 5 aliases of a small page selecting everything, 190 field selections, distinct by its aliases. */
const distinctDocument = (n: number) => `query Distinct${n} { ${Array.from({ length: 5 }, (_, k) => `d${n}_${k}: heads(first: ${1 + k}) { ${CONNECTION_FIELDS} }`).join(' ')} }`;

/** The heaviest operation the limits let through: `aliases` full pages of every field (a fragment keeps the batch within MAX_BODY_BYTES). */
const heaviestOperation = (aliases: number) =>
  `query Heaviest { ${Array.from({ length: aliases }, (_, k) => `h${k}: heads(first: 100) { ...Page }`).join(' ')} } fragment Page on HeadConnection { ${CONNECTION_FIELDS} }`;

const LIGHT_QUERY = JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' });

function options() {
  const { values } = parseArgs({
    options: {
      documents: { type: 'string', default: '2000' },
      repeats: { type: 'string', default: '3' },
      batches: { type: 'string', default: '5' },
      concurrency: { type: 'string', default: '4' },
      'heap-bound': { type: 'string', default: '150' },
      'rss-bound': { type: 'string', default: '300' },
      settle: { type: 'string', default: '10' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  exitWithHelp(values.help, usage);
  return {
    documents: integerOption('documents', values.documents, 0, 1_000_000),
    repeats: integerOption('repeats', values.repeats, 1, 100),
    batches: integerOption('batches', values.batches, 0, 10_000),
    concurrency: integerOption('concurrency', values.concurrency, 1, 256),
    heapBoundMb: integerOption('heap-bound', values['heap-bound'], 1, 100_000),
    rssBoundMb: integerOption('rss-bound', values['rss-bound'], 1, 100_000),
    settleSec: integerOption('settle', values.settle, 2, 600),
  };
}

interface Sample {
  readonly phase: string;
  readonly heapUsed: number;
  readonly rss: number;
}

const mb = (bytes: number) => `${(bytes / 1048576).toFixed(bytes < 10 * 1048576 ? 1 : 0)} MB`;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

/** What came back, by kind: `200 ok`, `400 GRAPHQL_VALIDATION_FAILED`, `200 batch: 7 ok, 3 X`... */
class Answers {
  readonly #counts = new Map<string, number>();
  add(kind: string): void {
    this.#counts.set(kind, (this.#counts.get(kind) ?? 0) + 1);
  }
  toString(): string {
    return [...this.#counts].map(([kind, n]) => `${n} × ${kind}`).join(', ') || 'none';
  }
}

type Result = { data?: unknown; errors?: { extensions?: { code?: string } }[] };
const outcome = (result: Result) => (result.errors?.length ? String(result.errors[0]!.extensions?.code ?? 'no code') : result.data ? 'ok' : 'empty');

function describe(status: number, text: string): string {
  if (status === 0) return `no answer (${text})`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} not JSON`;
  }
  if (!Array.isArray(body)) return `${status} ${outcome(body as Result)}`;
  const kinds = new Map<string, number>();
  for (const result of body as Result[]) kinds.set(outcome(result), (kinds.get(outcome(result)) ?? 0) + 1);
  return `${status} batch: ${[...kinds].map(([kind, n]) => `${n} ${kind}`).join(', ')}`;
}

async function main(): Promise<void> {
  const opts = options();
  const config = loadConfig();
  console.log('Building (npm run build), as npm start does…');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit', timeout: 180_000 });
  // The embedded reference upstream (UPSTREAM_URL unset), so not production; one process, so /metrics is the serving one's.
  const { child, url } = await startServer('gateway', [...startFlags(), 'dist/main.js'], undefined, { UPSTREAM_URL: '', NODE_ENV: 'development', PORT: '0', HOST, WORKERS: '1', LOG_LEVEL: 'warn' });
  // A request that fails (timeout, reset) is an answer too: reported, not fatal.
  const post = (body: string) =>
    http(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' }, body }).catch((error: Error) => ({ status: 0, text: `"${error.name}"` }));

  const samples: Sample[] = [];
  let phase = 'start';
  const sampler = setInterval(() => {
    void gatewayMemory(url).then((memory) => memory && samples.push({ phase, ...memory }), () => undefined);
  }, SAMPLE_MS);
  let died: string | undefined;
  child.process.once('exit', (code, signal) => (died = `the gateway exited (${signal ?? code}): ${child.tail.slice(-3).join(' | ')}`));

  /** Light traffic for --settle seconds; the median of the samples taken meanwhile. */
  const settle = async (name: string) => {
    phase = name;
    for (const end = Date.now() + opts.settleSec * 1000; Date.now() < end && died === undefined; ) {
      await post(LIGHT_QUERY);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const settled = samples.filter((s) => s.phase === name);
    return { heapUsed: median(settled.map((s) => s.heapUsed)), rss: median(settled.map((s) => s.rss)), samples: settled.length };
  };
  const peak = (...phases: string[]) => samples.filter((s) => phases.includes(s.phase)).reduce((most, s) => ({ heapUsed: Math.max(most.heapUsed, s.heapUsed), rss: Math.max(most.rss, s.rss) }), { heapUsed: 0, rss: 0 });

  // Warm: the code paths of both phases run once before the start is measured.
  await post(JSON.stringify({ query: distinctDocument(-1) }));
  await post(JSON.stringify({ query: heaviestOperation(1) }));
  const start = await settle('start');
  console.log(`Gateway ${url} (COMPILED_EXECUTION=${config.compiledExecution ? 'on' : 'off'}); start: heap ${mb(start.heapUsed)}, RSS ${mb(start.rss)} (medians of ${start.samples} samples)`);

  phase = 'documents';
  const documentAnswers = new Answers();
  let next = 0;
  const sendDocuments = async () => {
    for (let n = next++; n < opts.documents && died === undefined; n = next++) {
      const body = JSON.stringify({ query: distinctDocument(n) });
      for (let i = 0; i < opts.repeats; i++) {
        const { status, text } = await post(body);
        documentAnswers.add(describe(status, text));
      }
      if ((n + 1) % 250 === 0) console.log(`  ${n + 1} documents sent; heap ${mb(samples.at(-1)?.heapUsed ?? 0)}, RSS ${mb(samples.at(-1)?.rss ?? 0)}`);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, sendDocuments));
  const afterDocuments = await settle('after documents');
  const documentsPeak = peak('documents', 'after documents');
  console.log(`Documents: ${opts.documents} distinct × ${opts.repeats}: ${documentAnswers}`);
  console.log(`  heap ${mb(start.heapUsed)} → ${mb(afterDocuments.heapUsed)} (peak ${mb(documentsPeak.heapUsed)}), RSS ${mb(start.rss)} → ${mb(afterDocuments.rss)} (peak ${mb(documentsPeak.rss)})`);

  phase = 'batches';
  const batch = JSON.stringify(Array.from({ length: config.maxBatch }, () => ({ query: heaviestOperation(config.limits.maxAliases) })));
  const batchAnswers = new Answers();
  let largest = 0;
  for (let i = 0; i < opts.batches && died === undefined; i++) {
    const { status, text } = await post(batch);
    largest = Math.max(largest, text.length);
    batchAnswers.add(describe(status, text));
  }
  const afterBatches = await settle('after batches');
  const batchesPeak = peak('batches', 'after batches');
  clearInterval(sampler);
  console.log(`Batches: ${opts.batches} × ${config.maxBatch} operations of ${config.limits.maxAliases} × heads(first: 100): ${batchAnswers}; largest answer ${mb(largest)}`);
  console.log(`  heap ${mb(afterDocuments.heapUsed)} → ${mb(afterBatches.heapUsed)} (peak ${mb(batchesPeak.heapUsed)}), RSS ${mb(afterDocuments.rss)} → ${mb(afterBatches.rss)} (peak ${mb(batchesPeak.rss)})`);

  const heapGrowth = afterDocuments.heapUsed - start.heapUsed;
  const rssGrowth = Math.max(documentsPeak.rss, batchesPeak.rss) - start.rss;
  const heapOk = heapGrowth <= opts.heapBoundMb * 1048576;
  const rssOk = rssGrowth <= opts.rssBoundMb * 1048576;
  console.log(`Heap after the documents: ${heapGrowth < 0 ? '-' : '+'}${mb(Math.abs(heapGrowth))} (bound ${opts.heapBoundMb} MB): ${heapOk ? 'OK' : 'NOT OK'}`);
  console.log(`Peak RSS: ${rssGrowth < 0 ? '-' : '+'}${mb(Math.abs(rssGrowth))} over the start (bound ${opts.rssBoundMb} MB): ${rssOk ? 'OK' : 'NOT OK'}`);
  if (died !== undefined) console.log(`NOT OK: ${died}`);
  const ok = heapOk && rssOk && died === undefined;
  console.log(`Verdict: ${ok ? 'OK' : 'NOT OK'}`);
  if (!ok) process.exitCode = 1;
}

await runBench(main, usage);
