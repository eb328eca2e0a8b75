import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import type { CutReason, RealTimeMetrics, StreamTransport } from '../instruments/real-time-metrics.js';
import type { Serve } from '../pipeline/stages.js';
import { eventIdOf, type OperationState } from '../request-state.js';
import { done } from './change-queue.js';
import { resolveEvent } from './event-requests.js';

/**
 * Whether a result says the subscriber's token is refused now (an upstream 401, masked as
 * UNAUTHENTICATED; or no token where the selection needs one): its stream ends, as no later event
 * could be read.
 */
export const refusedToken = (result: ExecutionResult) => result.errors?.some((error) => error.extensions?.['code'] === 'UNAUTHENTICATED') === true;

/** What subscribers share one resolution of an event by: the same token, document and variables read the same. */
export function sharingKey(operation: OperationState): string {
  const { request, params } = operation;
  return `${request.tokenCaller ?? ''}\n${params.operationName ?? ''}\n${JSON.stringify(params.variables ?? {})}\n${operation.prepared!.text}`;
}

/** The transport a request's stream goes out on. */
export function transportOf(operation: OperationState): StreamTransport {
  const { request } = operation;
  if (request.incoming.takesResults === true) return 'websocket';
  return request.negotiated?.parts === 'text/event-stream' ? 'sse' : 'multipart';
}

/** An event's result for a sharing key, its JSON (what a polled change is compared by), and the heads it read (what a live query watches). */
export interface Resolved {
  readonly result: ExecutionResult;
  readonly json: string;
  readonly heads: readonly string[];
}

/**
 * Each event resolved as an operation of its own, a request through the gateway's one door
 * (event-requests.ts: admitted, planned, charged and recorded as any, on the subscriber's behalf),
 * once per sharing key (token, document, variables): N subscribers sharing one cost one
 * upstream read per event, charged to the subscriber whose stream asked first.
 */
export class EventResolutions {
  /** Each event's resolution per sharing key, while the event is held by a subscriber's queue or stream. */
  readonly #resolved = new WeakMap<HeadChange, Map<string, Promise<Resolved>>>();
  #serve: Serve | undefined;

  /** Where the events' requests go: the gateway's door, made once the policies that hold this are (gateway.ts). */
  serveThrough(serve: Serve): void {
    this.#serve = serve;
  }

  /** The result of `change` for `operation`'s subscribers (sharing `key`). */
  of(change: HeadChange, operation: OperationState, key: string): Promise<Resolved> {
    let byKey = this.#resolved.get(change);
    if (byKey === undefined) this.#resolved.set(change, (byKey = new Map()));
    let resolved = byKey.get(key);
    if (resolved === undefined) {
      resolved = resolveEvent(this.#serve!, operation, change).then(({ result, heads }) => {
        const json = JSON.stringify(result);
        // Its SSE id, the same for every subscriber it goes to: one object for all, framed once for each transport (answers/parts.ts).
        (result as { [eventIdOf]?: string })[eventIdOf] = String(change.at);
        return { result, json, heads };
      });
      byKey.set(key, resolved);
    }
    return resolved;
  }
}

export interface SubscriberStreamOptions {
  readonly resolutions: EventResolutions;
  readonly metrics: RealTimeMetrics;
  /** Gives back the subscription's place in the limits, once it ends. */
  readonly release: () => void;
  /** Whether the process is stopping: a stream ended then is cut for that reason. */
  readonly stopping: () => boolean;
}

/**
 * One subscriber's results: each change of `source` resolved (once for the subscribers of the same token, document and variables), until the
 * head is deleted (after that event), the token is refused (after that event), the client leaves
 * or the process stops. A polled change whose result is what the subscriber was last sent is not sent.
 * Not an async generator: its `return` must end it at once, not after the pending `next`.
 */
export function subscriberStream(operation: OperationState, source: AsyncIterator<HeadChange>, options: SubscriberStreamOptions): AsyncIterableIterator<ExecutionResult> {
  const { resolutions, metrics } = options;
  const key = sharingKey(operation);
  /** What this subscriber was last sent: a polled change that reads the same is not sent. */
  let last: string | undefined;
  const closed = metrics.opened(transportOf(operation));
  let ended = false;
  const end = (cut?: CutReason) => {
    if (ended) return;
    ended = true;
    if (cut !== undefined) metrics.streamsCut.inc({ reason: cut });
    closed();
    options.release();
    void source.return?.();
  };
  const next = async (): Promise<IteratorResult<ExecutionResult, undefined>> => {
    for (;;) {
      const step = await source.next();
      if (step.done === true || ended) return done;
      const change = step.value;
      const { result, json } = await resolutions.of(change, operation, key);
      if (change.polled === true && change.deleted !== true && json === last) {
        metrics.dropped.inc({ reason: 'unchanged' });
        continue;
      }
      last = json;
      metrics.delivered.inc();
      metrics.delivery.observe(Math.max(0, Date.now() - change.at) / 1000);
      if (change.deleted === true) end('deleted');
      else if (refusedToken(result)) end('unauthenticated');
      return { done: false, value: result };
    }
  };
  const results: AsyncIterableIterator<ExecutionResult> = {
    [Symbol.asyncIterator]: () => results,
    async next() {
      if (ended) return done;
      const step = await next();
      if (step.done === true) end(options.stopping() ? 'stopping' : undefined);
      return step;
    },
    return() {
      end();
      return Promise.resolve(done);
    },
  };
  return results;
}
