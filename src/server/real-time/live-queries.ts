import { setTimeout as sleep } from 'node:timers/promises';
import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import type { RealTimeMetrics } from '../instruments/real-time-metrics.js';
import type { OperationState } from '../request-state.js';
import { done } from './change-queue.js';
import type { HeadEvents } from './head-events.js';
import type { HeadPolling } from './head-polling.js';
import { sharingKey, transportOf, type EventResolutions, type Resolved } from './subscriber-stream.js';

export interface LiveQueryOptions {
  readonly listen: HeadEvents['listen'];
  readonly polling: HeadPolling;
  readonly resolutions: EventResolutions;
  readonly metrics: RealTimeMetrics;
  /** SUBSCRIPTION_LIVE_THROTTLE_MS: the least time between two results. */
  readonly throttleMs: number;
  /** Gives back the live query's place in the limits, once it ends. */
  readonly release: () => void;
  /** Whether the process is stopping: a stream ended then is cut for that reason. */
  readonly stopping: () => boolean;
}

/** A live query's results, and how the process ends it as it stops. */
export interface LiveQuery extends AsyncIterableIterator<ExecutionResult> {
  finish(): void;
}

/** One head a live query watches: its listener, and its watch for polling. */
interface Watch {
  readonly unlisten: () => void;
  readonly unwatch: () => void;
}

/** The heads a live query watches, made the set it read last (`watch(heads)`): each one's changes go to `changed`, and it is polled while watched. */
function headWatches(listen: HeadEvents['listen'], polling: HeadPolling, changed: (change: HeadChange) => void): (heads: readonly string[]) => void {
  const watched = new Map<string, Watch>();
  return (heads) => {
    const now = new Set(heads);
    for (const id of now) {
      if (watched.has(id)) continue;
      watched.set(id, { unlisten: listen(id, changed), unwatch: polling.watch(id) });
    }
    for (const [id, gone] of watched) {
      if (now.has(id)) continue;
      gone.unwatch();
      gone.unlisten();
      watched.delete(id);
    }
  };
}

/**
 * A live query (`@live`): its first result at once, then the whole result again each time a head
 * it read changes (a write through any replica, or found by polling: every head it read is
 * watched as a subscribed one is), at most once every `throttleMs` (the changes of the meantime
 * sent together). Each result is read as a subscription's event is (subscriber-stream.ts: a
 * fresh context, shared by live queries with the same token, document and variables), and the
 * heads it read become what it watches next. A polled change that reads the same is not sent. It
 * ends when its client leaves or the process stops.
 */
export function liveQuery(operation: OperationState, options: LiveQueryOptions): LiveQuery {
  const { resolutions, metrics, listen, polling } = options;
  const key = sharingKey(operation);
  const closed = metrics.opened(transportOf(operation));
  let pending: HeadChange | undefined;
  let wake: (() => void) | undefined;
  let finished = false;
  let started = false;
  let last: string | undefined;
  let sentAt = 0;
  let stop: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (stop = resolve));

  const changed = (change: HeadChange) => {
    if (pending !== undefined) metrics.dropped.inc({ reason: 'folded' });
    pending = change;
    wake?.();
  };
  const watch = headWatches(listen, polling, changed);
  const sent = ({ result, json, heads }: Resolved): IteratorResult<ExecutionResult, undefined> => {
    watch(heads);
    last = json;
    sentAt = performance.now();
    metrics.delivered.inc();
    return { done: false, value: result };
  };
  const finish = () => {
    if (finished) return;
    finished = true;
    watch([]);
    closed();
    options.release();
    stop();
    wake?.();
  };
  /** The next change, once the throttle lets one go: undefined once finished. */
  const nextChange = async (): Promise<HeadChange | undefined> => {
    while (pending === undefined && !finished) await new Promise<void>((resolve) => (wake = resolve));
    const wait = sentAt + options.throttleMs - performance.now();
    if (wait > 0 && !finished) await Promise.race([sleep(wait), stopped]);
    const change = pending;
    pending = undefined;
    return finished ? undefined : change;
  };

  const live: LiveQuery = {
    [Symbol.asyncIterator]: () => live,
    async next() {
      if (!started) {
        started = true;
        const first: HeadChange = { id: '', at: Date.now() };
        return sent(await resolutions.of(first, operation, key));
      }
      for (let change = await nextChange(); change !== undefined; change = await nextChange()) {
        const resolved = await resolutions.of(change, operation, key);
        if (change.polled === true && resolved.json === last) {
          metrics.dropped.inc({ reason: 'unchanged' });
          watch(resolved.heads);
          continue;
        }
        metrics.delivery.observe(Math.max(0, Date.now() - change.at) / 1000);
        return sent(resolved);
      }
      if (options.stopping()) metrics.streamsCut.inc({ reason: 'stopping' });
      return done;
    },
    return() {
      finish();
      return Promise.resolve(done);
    },
    finish,
  };
  return live;
}
