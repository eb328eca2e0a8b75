import { STATUS_CODES } from 'node:http';
import { z } from 'zod';
import { type OperationName, operationNames } from '../domain/operations.js';
import type { Exchange } from './exchange.js';

export type Fault =
  | { kind: 'latency'; ms: number }
  | { kind: 'status'; status: number; body?: unknown; headers?: Record<string, string> }
  | { kind: 'malformed-json' }
  /** A well-formed JSON body that fails the contract's schema; default `{unexpected:true}`. */
  | { kind: 'off-contract'; body?: unknown }
  /** Destroys the socket without answering. */
  | { kind: 'drop' };

const faultSchema: z.ZodType<Fault> = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('latency'), ms: z.number().int().min(0).max(600_000) }),
  z.object({
    kind: z.literal('status'),
    status: z.number().int().min(200).max(599),
    body: z.unknown().optional(),
    headers: z.record(z.string(), z.string()).optional(),
  }),
  z.object({ kind: z.literal('malformed-json') }),
  z.object({ kind: z.literal('off-contract'), body: z.unknown().optional() }),
  z.object({ kind: z.literal('drop') }),
]);

/** The body of `POST /__reference/faults`. */
export const faultRequestSchema = z.object({
  operation: z.enum(operationNames),
  fault: faultSchema,
  times: z.number().int().min(1).optional(),
});

const MALFORMED_JSON = '{"items":[{"name":"Head 001 Aurora","id":"';
const DEFAULT_OFF_CONTRACT = { unexpected: true };

/** Faults queued per operation; each covers the next `times` requests of its operation. */
export class FaultQueue {
  /** Only operations with a fault still to give: empty while nothing is queued (benchmarks, most tests). */
  private readonly queues = new Map<OperationName, { fault: Fault; remaining: number }[]>();
  /** Requests a latency fault is holding: each one's timer and what answers it. */
  private readonly held = new Map<NodeJS.Timeout, () => void>();

  /** @param dispatch answers a request as if no fault were queued (after a latency fault's wait). */
  constructor(private readonly dispatch: (ex: Exchange) => void) {}

  inject(operation: OperationName, fault: Fault, times = 1): void {
    if (!operationNames.includes(operation)) throw new Error(`unknown operation ${operation}`);
    const parsed = faultSchema.parse(fault);
    if (!Number.isInteger(times) || times < 1) throw new Error(`times must be a positive integer, got ${times}`);
    const queue = this.queues.get(operation) ?? [];
    queue.push({ fault: parsed, remaining: times });
    this.queues.set(operation, queue);
  }

  clear(): void {
    this.queues.clear();
  }

  /** The fault for this request of `operation`, if one is queued; it counts as used. */
  take(operation: OperationName): Fault | undefined {
    const queue = this.queues.get(operation);
    const head = queue?.[0];
    if (head === undefined) return undefined;
    if (--head.remaining === 0) {
      queue!.shift();
      if (queue!.length === 0) this.queues.delete(operation);
    }
    return head.fault;
  }

  /** Answers `ex` as the fault says; a latency fault hands it to `dispatch` afterwards. */
  apply(ex: Exchange, fault: Fault): void {
    switch (fault.kind) {
      case 'latency':
        this.delay(ex, fault.ms);
        return;
      case 'status': {
        const noBody = fault.status === 204 || fault.status === 304;
        ex.send(
          fault.status,
          noBody ? undefined : JSON.stringify(fault.body ?? { detail: STATUS_CODES[fault.status] ?? 'Injected fault' }),
          fault.headers,
        );
        return;
      }
      case 'malformed-json':
        ex.send(200, MALFORMED_JSON);
        return;
      case 'off-contract':
        ex.send(200, JSON.stringify(fault.body ?? DEFAULT_OFF_CONTRACT));
        return;
      case 'drop':
        ex.req.socket.destroy();
        ex.finish(undefined);
        return;
    }
  }

  /** Stops every pending latency timer (the server is closing). */
  cancelTimers(): void {
    for (const timer of this.held.keys()) clearTimeout(timer);
    this.held.clear();
  }

  /**
   * Answers at once every request a latency fault is holding, as its timer would have; returns
   * how many. A test holds a response with a long latency and releases it when it has seen what
   * it wanted in flight, instead of guessing how long that takes.
   */
  releaseHeld(): number {
    const answers = [...this.held];
    for (const [timer, answer] of answers) {
      clearTimeout(timer);
      answer();
    }
    return answers.length;
  }

  private delay(ex: Exchange, ms: number): void {
    const onClose = () => {
      clearTimeout(timer);
      this.held.delete(timer);
      ex.finish(undefined);
    };
    const answer = () => {
      this.held.delete(timer);
      ex.res.off('close', onClose);
      if (ex.res.destroyed || ex.req.socket.destroyed) ex.finish(undefined);
      else this.dispatch(ex);
    };
    const timer = setTimeout(answer, ms);
    this.held.set(timer, answer);
    // A client that gave up gets nothing; its slot is released at once.
    ex.res.once('close', onClose);
  }
}
