import { parseArgs } from 'node:util';
import { exitWithHelp, integerOption, runBench } from '../bench/cli.js';
import { type Child, gatewayMemory, http, startBuiltGateway } from '../bench/processes.js';
import { type Config, loadConfig } from '../src/config.js';

/*
 * `npm run memory`: whether one client, within every configured limit, can grow the gateway's
 * memory. Builds and starts the gateway as `npm start` does (node flags of package.json, the
 * embedded reference upstream, one process), then:
 *  1. documents: thousands of distinct large documents (~190 field selections each), each sent
 *     several times, so that every cache keyed by document (parse, validation, plan, compiled
 *     execution) sees each of them hot;
 *  2. batches: MAX_BATCH operations of MAX_ALIASES aliases of `heads(first: 100)` selecting every
 *     field (the attack of the hardening issue: refused by MAX_RESULT_ITEMS now), then MAX_BATCH
 *     operations of the largest the limits let through (MAX_RESULT_ITEMS / 200 such aliases),
 *     reporting whatever answers come back, the largest answer, and the longest the gateway's
 *     event loop was held meanwhile (its own event-loop delay metric).
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
const HEAD_FIELDS =
  'id uuid name url arUrl outputFormat style version lod headMetadata createdAt updatedAt hair { id name url thumbnailUrl style createdAt sourceType gender objMetadata payableData { price description } updatedAt hairMetadata userId }';
const CONNECTION_FIELDS = `totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor } nodes { ${HEAD_FIELDS} }`;

/** Document `n`: 5 aliases of a small page selecting everything, 190 field selections, distinct by its aliases. */
const distinctDocument = (n: number) =>
  `query Distinct${n} { ${Array.from({ length: 5 }, (_, k) => `d${n}_${k}: heads(first: ${1 + k}) { ${CONNECTION_FIELDS} }`).join(' ')} }`;

/**
 * The heaviest operation the other limits let through: `aliases` full pages of every field (a fragment keeps the batch
 * within MAX_BODY_BYTES).
 */
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
  /** Seconds the event loop was held at most since the sample before. */
  readonly loopStall: number;
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
const outcome = (result: Result) =>
  result.errors?.length ? String(result.errors[0]!.extensions?.code ?? 'no code') : result.data ? 'ok' : 'empty';

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

type Options = ReturnType<typeof options>;
type Memory = { heapUsed: number; rss: number; loopStall: number };

/** The gateway child process: requests to it, and its memory sampled all along, by phase. */
class Gateway {
  readonly #samples: Sample[] = [];
  readonly #sampler: NodeJS.Timeout;
  #phase = 'start';
  /** Why the process ended early, if it did. */
  died: string | undefined;

  constructor(
    readonly url: string,
    child: Child,
    private readonly settleSec: number,
  ) {
    this.#sampler = setInterval(() => {
      void gatewayMemory(url).then(
        (memory) => memory && this.#samples.push({ phase: this.#phase, ...memory }),
        () => undefined,
      );
    }, SAMPLE_MS);
    child.process.once(
      'exit',
      (code, signal) => (this.died = `the gateway exited (${signal ?? code}): ${child.tail.slice(-3).join(' | ')}`),
    );
  }

  /** A request that fails (timeout, reset) is an answer too: reported, not fatal. */
  post(body: string): Promise<{ status: number; text: string }> {
    return http(this.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body,
    }).catch((error: Error) => ({ status: 0, text: `"${error.name}"` }));
  }

  begin(phase: string): void {
    this.#phase = phase;
  }

  latest(): Memory {
    return this.#samples.at(-1) ?? { heapUsed: 0, rss: 0, loopStall: 0 };
  }

  /** Light traffic for the settling time; the medians of the samples taken meanwhile. */
  async settle(phase: string): Promise<Memory & { samples: number }> {
    this.begin(phase);
    for (const end = Date.now() + this.settleSec * 1000; Date.now() < end && this.died === undefined; ) {
      await this.post(LIGHT_QUERY);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const settled = this.#samples.filter((s) => s.phase === phase);
    return {
      heapUsed: median(settled.map((s) => s.heapUsed)),
      rss: median(settled.map((s) => s.rss)),
      loopStall: median(settled.map((s) => s.loopStall)),
      samples: settled.length,
    };
  }

  peak(...phases: string[]): Memory {
    return this.#samples
      .filter((s) => phases.includes(s.phase))
      .reduce(
        (most, s) => ({
          heapUsed: Math.max(most.heapUsed, s.heapUsed),
          rss: Math.max(most.rss, s.rss),
          loopStall: Math.max(most.loopStall, s.loopStall),
        }),
        { heapUsed: 0, rss: 0, loopStall: 0 },
      );
  }

  stopSampling(): void {
    clearInterval(this.#sampler);
  }
}

const stall = (memory: Memory) => `${Math.round(memory.loopStall * 1000)} ms`;
const change = (from: Memory, to: Memory, peak: Memory) =>
  `heap ${mb(from.heapUsed)} → ${mb(to.heapUsed)} (peak ${mb(peak.heapUsed)}), RSS ${mb(from.rss)} → ${mb(to.rss)} (peak ${mb(peak.rss)})`;

/** Each distinct document --repeats times, --concurrency documents at a time. */
async function sendDocuments(gateway: Gateway, opts: Options): Promise<Answers> {
  gateway.begin('documents');
  const answers = new Answers();
  let next = 0;
  const sender = async () => {
    for (let n = next++; n < opts.documents && gateway.died === undefined; n = next++) {
      const body = JSON.stringify({ query: distinctDocument(n) });
      for (let i = 0; i < opts.repeats; i++) {
        const { status, text } = await gateway.post(body);
        answers.add(describe(status, text));
      }
      if ((n + 1) % 250 === 0)
        console.log(
          `  ${n + 1} documents sent; heap ${mb(gateway.latest().heapUsed)}, RSS ${mb(gateway.latest().rss)}`,
        );
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, sender));
  return answers;
}

/** --batches batches of MAX_BATCH `aliases`-page operations, one after the other; the largest answer's length. */
async function sendBatches(
  gateway: Gateway,
  phase: string,
  aliases: number,
  config: Config,
  opts: Options,
): Promise<{ answers: Answers; largest: number }> {
  gateway.begin(phase);
  const batch = JSON.stringify(Array.from({ length: config.maxBatch }, () => ({ query: heaviestOperation(aliases) })));
  const answers = new Answers();
  let largest = 0;
  for (let i = 0; i < opts.batches && gateway.died === undefined; i++) {
    const { status, text } = await gateway.post(batch);
    largest = Math.max(largest, text.length);
    answers.add(describe(status, text));
  }
  return { answers, largest };
}

/** Whether a growth is within its bound, said on one line. */
function judged(what: string, growth: number, boundMb: number): boolean {
  const ok = growth <= boundMb * 1048576;
  console.log(
    `${what}: ${growth < 0 ? '-' : '+'}${mb(Math.abs(growth))} (bound ${boundMb} MB): ${ok ? 'OK' : 'NOT OK'}`,
  );
  return ok;
}

async function main(): Promise<void> {
  const opts = options();
  const config = loadConfig();
  const { child, url } = await startBuiltGateway();
  const gateway = new Gateway(url, child, opts.settleSec);

  // Warm: the code paths of both phases run once before the start is measured.
  await gateway.post(JSON.stringify({ query: distinctDocument(-1) }));
  await gateway.post(JSON.stringify({ query: heaviestOperation(1) }));
  const start = await gateway.settle('start');
  console.log(
    `Gateway ${url} (COMPILED_EXECUTION=${config.compiledExecution ? 'on' : 'off'}); start: heap ${mb(start.heapUsed)}, RSS ${mb(start.rss)} (medians of ${start.samples} samples)`,
  );

  const documentAnswers = await sendDocuments(gateway, opts);
  const afterDocuments = await gateway.settle('after documents');
  const documentsPeak = gateway.peak('documents', 'after documents');
  console.log(
    `Documents: ${opts.documents} distinct × ${opts.repeats}: ${documentAnswers}\n  ${change(start, afterDocuments, documentsPeak)}`,
  );

  const batches = await sendBatches(gateway, 'batches', config.limits.maxAliases, config, opts);
  const afterBatches = await gateway.settle('after batches');
  const batchesPeak = gateway.peak('batches', 'after batches');
  console.log(
    `Batches: ${opts.batches} × ${config.maxBatch} operations of ${config.limits.maxAliases} × heads(first: 100): ${batches.answers}; largest answer ${mb(batches.largest)}`,
  );
  console.log(`  ${change(afterDocuments, afterBatches, batchesPeak)}; event loop held ${stall(batchesPeak)} at most`);
  // The most a request may ask for: MAX_RESULT_ITEMS of the heaviest item there is (a page answers 100 edges and 100
  // nodes).
  const allowedAliases = Math.min(config.limits.maxAliases, Math.max(1, Math.floor(config.maxResultItems / 200)));
  const allowed = await sendBatches(gateway, 'allowed', allowedAliases, config, opts);
  const afterAllowed = await gateway.settle('after allowed');
  const allowedPeak = gateway.peak('allowed', 'after allowed');
  gateway.stopSampling();
  console.log(
    `Within the limits: ${opts.batches} × ${config.maxBatch} operations of ${allowedAliases} × heads(first: 100): ${allowed.answers}; largest answer ${mb(allowed.largest)}`,
  );
  console.log(`  ${change(afterBatches, afterAllowed, allowedPeak)}; event loop held ${stall(allowedPeak)} at most`);

  const heapOk = judged('Heap after the documents', afterDocuments.heapUsed - start.heapUsed, opts.heapBoundMb);
  const rssOk = judged(
    'Peak RSS over the start',
    Math.max(documentsPeak.rss, batchesPeak.rss, allowedPeak.rss) - start.rss,
    opts.rssBoundMb,
  );
  if (gateway.died !== undefined) console.log(`NOT OK: ${gateway.died}`);
  const ok = heapOk && rssOk && gateway.died === undefined;
  console.log(`Verdict: ${ok ? 'OK' : 'NOT OK'}`);
  if (!ok) process.exitCode = 1;
}

await runBench(main, usage);
