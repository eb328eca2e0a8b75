import { Repeater } from '@repeaterjs/repeater';
import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import type { CutReason, RealTimeMetrics, StreamTransport } from '../instruments/real-time-metrics.js';
import type { OperationState, PreparedOperationState } from '../operation-state.js';
import { type EventResolutions, sharingKey } from './event-resolutions.js';

/** The token refused now (UNAUTHENTICATED: an upstream 401, or none where needed): no later event could be read. */
const refusedToken = (result: ExecutionResult) =>
  result.errors?.some((error) => error.extensions?.code === 'UNAUTHENTICATED') === true;

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
 * One subscriber's results: each change of `source` resolved (shared, event-resolutions.ts), until after a deletion or
 * refused token, or the client leaves or the process stops. A slow one has its changes folded (change-queue.ts).
 */
export function subscriberStream(
  operation: PreparedOperationState,
  source: AsyncIterableIterator<HeadChange>,
  options: SubscriberStreamOptions,
): AsyncIterableIterator<ExecutionResult> {
  const { resolutions, metrics } = options;
  const key = sharingKey(operation);
  return new Repeater<ExecutionResult>(async (push, stop) => {
    let cut: CutReason | undefined;
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
