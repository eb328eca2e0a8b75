import { Repeater } from '@repeaterjs/repeater';
import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import type { CutReason, RealTimeMetrics, StreamTransport } from '../instruments/real-time-metrics.js';
import type { OperationState } from '../operation-state.js';
import { type EventResolutions, sharingKey } from './event-resolutions.js';

/**
 * Whether a result says the subscriber's token is refused now (an upstream 401, masked as
 * UNAUTHENTICATED; or no token where the selection needs one): its stream ends, as no later event
 * could be read.
 */
export const refusedToken = (result: ExecutionResult) =>
  result.errors?.some((error) => error.extensions?.code === 'UNAUTHENTICATED') === true;

/** The transport a request's stream goes out on, by what carries its parts. */
export function transportOf(operation: OperationState): StreamTransport {
  const parts = operation.request.negotiated?.parts;
  return parts === 'websocket' ? 'websocket' : parts === 'text/event-stream' ? 'sse' : 'multipart';
}

export interface SubscriberStreamOptions {
  readonly resolutions: EventResolutions;
  readonly metrics: RealTimeMetrics;
  /** Whether the process is stopping: a stream ended then is cut for that reason. */
  readonly stopping: () => boolean;
}

/**
 * One subscriber's results (a Repeater: a `return()` ends it at once, settling a `next()` still
 * waiting): each change of `source` resolved (once for the subscribers of the same token, document
 * and variables: event-resolutions.ts), until the head is deleted (after that event), the token is
 * refused (after that event), the client leaves or the process stops. A polled change whose result
 * is what the subscriber was last sent is not sent. A result is made as the subscriber asks for the
 * next: a slow one has its changes folded (change-queue.ts), never queued.
 */
export function subscriberStream(
  operation: OperationState,
  source: AsyncIterableIterator<HeadChange>,
  options: SubscriberStreamOptions,
): AsyncIterableIterator<ExecutionResult> {
  const { resolutions, metrics } = options;
  const key = sharingKey(operation);
  return new Repeater<ExecutionResult>(async (push, stop) => {
    let cut: CutReason | undefined;
    /** What this subscriber was last sent: a polled change that reads the same is not sent. */
    let last: string | undefined;
    // The subscriber stopping stops its changes (their `next()` settles done), once.
    void stop.then(() => source.return?.());
    try {
      for await (const change of source) {
        const { result, json } = await resolutions.of(change, operation, key);
        if (change.polled === true && change.deleted !== true && json === last) {
          metrics.dropped.inc({ reason: 'unchanged' });
          continue;
        }
        last = json;
        metrics.delivered.inc();
        metrics.delivery.observe(Math.max(0, Date.now() - change.at) / 1000);
        await push(result);
        cut = change.deleted === true ? 'deleted' : refusedToken(result) ? 'unauthenticated' : undefined;
        if (cut !== undefined) break;
      }
      cut ??= options.stopping() ? 'stopping' : undefined;
    } finally {
      if (cut !== undefined) metrics.streamsCut.inc({ reason: cut });
      // A Repeater ends when stopped, not when its executor returns.
      stop();
    }
  });
}
