import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import { type OperationName, operationNames } from '../domain/operations.js';

export interface RecordedRequest {
  /** undefined for a path or method outside the route table. */
  operation: OperationName | undefined;
  method: string;
  /** The request path as received (including the `/v2` base), without the query. */
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  /** The W3C `traceparent` header as received, so a test can join the caller's trace to ours. */
  traceparent?: string;
  /** Parsed JSON, a form object, the raw text when it did not parse, or undefined without a body. */
  body: unknown;
  startedAt: number;
  endedAt?: number;
  /** undefined when no response was sent (drop fault, client gone). */
  status?: number;
}

export const RECORDING_LIMIT = 10_000;

/** The operation a request was routed to, with its position in `operationNames`. */
export interface RoutedOperation {
  readonly operation: OperationName;
  readonly operationIndex: number;
}

/**
 * What the upstream saw: calls per operation and requests in flight (always, they are cheap), and
 * with `keep` the last RECORDING_LIMIT requests themselves, oldest first, for tests to read.
 */
export class Recording {
  readonly requests: RecordedRequest[] = [];
  // Indexed by operation position: a counter bump per request, no object key lookups.
  private readonly counts = new Array<number>(operationNames.length).fill(0);
  private current = 0;
  private peak = 0;

  constructor(private readonly keep: boolean) {}

  /** Counts a request that has arrived; returns its record when requests are kept. */
  begin(
    route: RoutedOperation | undefined,
    method: string,
    path: string,
    query: Record<string, string> | undefined,
    headers: IncomingHttpHeaders,
  ): RecordedRequest | undefined {
    if (route !== undefined) this.counts[route.operationIndex]!++;
    if (++this.current > this.peak) this.peak = this.current;
    if (!this.keep) return undefined;
    // Always present (undefined without the header), so every record has the same shape.
    const traceparent = typeof headers.traceparent === 'string' ? headers.traceparent : undefined;
    return {
      operation: route?.operation,
      method,
      path,
      query: query ?? {},
      headers,
      traceparent,
      body: undefined,
      startedAt: performance.now(),
    };
  }

  /** Keeps a record once its body is known. */
  remember(record: RecordedRequest, body: unknown): void {
    record.body = body;
    this.requests.push(record);
    if (this.requests.length > RECORDING_LIMIT) this.requests.shift();
  }

  /** A request is over: answered with `status`, or with nothing (undefined). */
  end(record: RecordedRequest | undefined, status: number | undefined): void {
    this.current--;
    if (record === undefined) return;
    record.endedAt = performance.now();
    if (status !== undefined) record.status = status;
  }

  inFlight(): number {
    return this.current;
  }

  maxInFlight(): number {
    return this.peak;
  }

  total(): number {
    return this.counts.reduce((a, b) => a + b, 0);
  }

  countsByOperation(): Record<string, number> {
    return Object.fromEntries(operationNames.map((op, i) => [op, this.counts[i]!]));
  }

  reset(): void {
    this.requests.length = 0;
    this.counts.fill(0);
    this.peak = this.current;
  }
}
