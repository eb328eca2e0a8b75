import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';

/*
 * The load of `npm run bench:overload` (bench/overload.ts), in a process of its own: autocannon
 * driven from code, so the latency of accepted (2xx) answers is kept apart from that of refusals,
 * which come back at once. Reads its task from OVERLOAD_TASK, prints one JSON line.
 */

export interface LoadTask {
  readonly url: string;
  readonly body: string;
  readonly headers: Record<string, string>;
  readonly connections: number;
  readonly seconds: number;
}

export interface LoadResult {
  /** 2xx answers, and their latency percentiles (ms). */
  readonly accepted: number;
  readonly acceptedP50Ms: number;
  readonly acceptedP99Ms: number;
  /** 503 answers (refusals). */
  readonly refused: number;
  /** Anything else: other statuses, connection errors, timeouts. */
  readonly failed: number;
  readonly seconds: number;
}

type Autocannon = (options: Record<string, unknown>, done: (error: Error | null) => void) => EventEmitter;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

async function run(task: LoadTask): Promise<LoadResult> {
  const latencies: number[] = [];
  let refused = 0;
  let failed = 0;
  await new Promise<void>((resolve, reject) => {
    const instance = autocannon(
      {
        url: task.url,
        method: 'POST',
        headers: task.headers,
        body: task.body,
        connections: task.connections,
        duration: task.seconds,
        timeout: 30,
      },
      (error) => (error ? reject(error) : resolve()),
    );
    instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) latencies.push(ms);
      else if (status === 503) refused++;
      else failed++;
    });
    instance.on('reqError', () => failed++);
  });
  latencies.sort((a, b) => a - b);
  return {
    accepted: latencies.length,
    acceptedP50Ms: percentile(latencies, 50),
    acceptedP99Ms: percentile(latencies, 99),
    refused,
    failed,
    seconds: task.seconds,
  };
}

process.stdout.write(`${JSON.stringify(await run(JSON.parse(process.env.OVERLOAD_TASK!) as LoadTask))}\n`);
