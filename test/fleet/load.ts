import { Pool } from 'undici';
import { until } from '../support/until.js';

/*
 * Steady keep-alive load: `connections` clients, each sending its next operation as soon as the
 * last is answered, over an undici Pool of as many keep-alive connections (to HAProxy). Every
 * request is counted, and every failure by kind: a network error (`network ECONNRESET`), a
 * status other than 200 (`http 502`, `http 503 OVERLOADED`), or a 200 carrying GraphQL errors
 * (`graphql UPSTREAM_UNAVAILABLE`). Times are reported, never judged.
 */

/**
 * The load's concurrency: keep-alive connections to HAProxy, each with one operation in flight at
 * a time (FLEET_CONNECTIONS; 8 by default, enough to keep three gateways busy on two cores
 * without pushing them into load shedding).
 */
export const LOAD_CONNECTIONS = Number(process.env.FLEET_CONNECTIONS || 8);

/** One operation to send: its kind (`read`, `write`, …, counted apart), the body, and headers over the JSON ones. */
export interface Operation {
  readonly kind: string;
  readonly body: object;
  readonly headers?: Record<string, string>;
}

export interface Tally {
  readonly sent: number;
  /** 200 without errors. */
  readonly ok: number;
  readonly failed: number;
  /** Sent and not answered yet. */
  readonly inFlight: number;
  /** Failures by kind. */
  readonly failures: Readonly<Record<string, number>>;
  /** Sent and ok per operation kind. */
  readonly byKind: Readonly<Record<string, { sent: number; ok: number }>>;
  /** The slowest answer (failures included), in ms. */
  readonly slowestMs: number;
  /** The first few failures as they came, for a failing test's message. */
  readonly samples: readonly string[];
  /** Each failed operation's number (its order of sending, from 0): which were sent before an event, which after. */
  readonly failedOperations: readonly number[];
}

export interface Load {
  tally(): Tally;
  /** Resolves once `count` more operations have been answered well than when it was called. */
  progress(count: number, limitMs?: number): Promise<void>;
  /** Stops sending, waits for the operations in flight, and returns the final tally. */
  stop(): Promise<Tally>;
  /** With `total`: resolves with the final tally once that many have been sent and answered. */
  readonly done: Promise<Tally>;
}

export interface LoadOptions {
  /** HAProxy's /graphql (or any endpoint). */
  readonly url: string;
  readonly connections: number;
  /** The nth operation (from 0). */
  readonly next: (n: number) => Operation;
  /** Stop after this many operations; unbounded (until `stop`) when unset. */
  readonly total?: number;
}

const SAMPLES = 10;

/** A failure's kind: what a client of the fleet would see. */
function failureOf(status: number, text: string): string | undefined {
  let body: { errors?: { extensions?: { code?: string } }[] } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  const code = body?.errors?.[0]?.extensions?.code ?? (body?.errors === undefined ? undefined : 'no code');
  if (status !== 200) return `http ${status}${code === undefined ? '' : ` ${code}`}`;
  if (body === undefined) return 'http 200 not JSON';
  return code === undefined ? undefined : `graphql ${code}`;
}

export function startLoad(options: LoadOptions): Load {
  const { origin, pathname } = new URL(options.url);
  // Keep-alive connections, never pipelined (HAProxy answers one request at a time per connection anyway).
  const pool = new Pool(origin, {
    connections: options.connections,
    pipelining: 1,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  let n = 0;
  let stopping = false;
  const counts = { sent: 0, ok: 0, failed: 0, inFlight: 0, slowestMs: 0 };
  const failures: Record<string, number> = {};
  const byKind: Record<string, { sent: number; ok: number }> = {};
  const samples: string[] = [];
  const failedOperations: number[] = [];

  const fail = (operation: number, kind: string, detail: string) => {
    counts.failed++;
    failedOperations.push(operation);
    failures[kind] = (failures[kind] ?? 0) + 1;
    if (samples.length < SAMPLES) samples.push(`#${operation} ${kind}: ${detail.slice(0, 300)}`);
  };

  const send = async (number: number, operation: Operation) => {
    const kind = byKind[operation.kind] ?? { sent: 0, ok: 0 };
    byKind[operation.kind] = kind;
    counts.sent++;
    counts.inFlight++;
    kind.sent++;
    const started = performance.now();
    try {
      const response = await pool.request({
        path: pathname,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json, application/json',
          ...operation.headers,
        },
        body: JSON.stringify(operation.body),
      });
      const text = await response.body.text();
      const failure = failureOf(response.statusCode, text);
      if (failure === undefined) {
        counts.ok++;
        kind.ok++;
      } else fail(number, failure, text);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? (error as Error).name;
      fail(number, `network ${code}`, String((error as Error).message));
    } finally {
      counts.inFlight--;
      counts.slowestMs = Math.max(counts.slowestMs, performance.now() - started);
    }
  };

  const client = async () => {
    while (!stopping && (options.total === undefined || n < options.total)) {
      const number = n++;
      await send(number, options.next(number));
    }
  };

  const tally = (): Tally => ({
    ...counts,
    failures: { ...failures },
    byKind: structuredClone(byKind),
    samples: [...samples],
    failedOperations: [...failedOperations],
  });
  const clients = Promise.all(Array.from({ length: options.connections }, client));
  const finished = clients.then(async () => {
    await pool.close();
    return tally();
  });

  return {
    tally,
    async progress(count, limitMs = 30_000) {
      const target = counts.ok + count;
      await until(() => counts.ok >= target, `${count} more operations answered through the fleet`, limitMs, 10);
    },
    async stop() {
      stopping = true;
      return finished;
    },
    done: finished,
  };
}

/** One line of figures: `failed 0 of 2,368 (reads 2,131, writes 237)`. */
export function describeTally(tally: Tally): string {
  const kinds = Object.entries(tally.byKind)
    .map(([kind, { sent }]) => `${kind} ${sent}`)
    .join(', ');
  const failures = Object.entries(tally.failures)
    .map(([kind, count]) => `${kind}: ${count}`)
    .join(', ');
  return `failed ${tally.failed} of ${tally.sent} (${kinds})${failures === '' ? '' : `: ${failures}`}, slowest ${Math.round(tally.slowestMs)} ms`;
}
