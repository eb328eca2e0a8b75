import { setTimeout as sleep } from 'node:timers/promises';
import { Repeater } from '@repeaterjs/repeater';
import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import type { PreparedOperationState } from '../operation-state.js';
import { folded } from './change-queue.js';
import { headsRead, type Resolved, sharingKey } from './event-resolutions.js';
import type { HeadEvents } from './head-events.js';
import type { HeadPolling } from './head-polling.js';
import type { SubscriberStreamOptions } from './subscriber-stream.js';

export interface LiveQueryOptions extends SubscriberStreamOptions {
  readonly listen: HeadEvents['listen'];
  readonly polling: HeadPolling;
  /** SUBSCRIPTION_LIVE_THROTTLE_MS: the least time between two results. */
  readonly throttleMs: number;
  /** Charges the heads it watches (to `heads`) to its caller's share (subscriptions.ts): a refusal when over. */
  readonly charge: (heads: number) => ExecutionResult | undefined;
}

/** The heads a live query watches, made the set it read last (`watch(heads)`): listened to (`changed`) and polled. */
function headWatches(listen: HeadEvents['listen'], polling: HeadPolling, changed: (change: HeadChange) => void) {
  const watched = new Map<string, { unlisten: () => void; unwatch: () => void }>();
  return (heads: readonly string[]): void => {
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

/** The changes a live query has not taken, folded (change-queue.ts's rule), and a wait for one until `ended`. */
class LatestChange {
  #waiting: HeadChange | undefined;
  #wake: (() => void) | undefined;

  constructor(
    private readonly onFolded: () => void,
    private readonly ended: AbortSignal,
  ) {
    ended.addEventListener('abort', () => this.#wake?.(), { once: true });
  }

  readonly put = (change: HeadChange): void => {
    if (this.#waiting !== undefined) this.onFolded();
    this.#waiting = folded(this.#waiting, change);
    this.#wake?.();
  };

  /** The change folded so far, once there is one; undefined once ended. */
  async take(): Promise<HeadChange | undefined> {
    while (this.#waiting === undefined && !this.ended.aborted)
      await new Promise<void>((resolve) => (this.#wake = resolve));
    const change = this.ended.aborted ? undefined : this.#waiting;
    this.#waiting = undefined;
    return change;
  }
}

/**
 * A live query (`@live`): its first result (its own operation's, counted and traced once, as its request), then the
 * whole result again each time a head it read changes, at most once every `throttleMs`. Later results are resolved as
 * subscription events (event-resolutions.ts). A query watching nothing could never be sent again, and ends.
 */
export function liveQuery(
  operation: PreparedOperationState,
  first: Promise<ExecutionResult>,
  options: LiveQueryOptions,
): AsyncIterableIterator<ExecutionResult> {
  const { resolutions, metrics } = options;
  const key = sharingKey(operation);
  return new Repeater<ExecutionResult>(async (push, stop) => {
    // Ended once, as the consumer returns or the process stops: what waits (the throttle, a change) hears it once.
    const ended = new AbortController();
    void stop.then(() => ended.abort());
    const latest = new LatestChange(() => metrics.dropped.inc({ reason: 'folded' }), ended.signal);
    const watch = headWatches(options.listen, options.polling, latest.put);
    try {
      const result = await first;
      let resolved: Resolved = { result, json: JSON.stringify(result), heads: headsRead(operation) };
      let change: HeadChange | undefined;
      let watched: readonly string[] = [];
      let last: string | undefined;
      let sentAt = 0;
      for (;;) {
        // It watches the heads it read; when it read none as it failed, those before (so the next change is sent).
        if (resolved.heads.length > 0 || !resolved.result.errors?.length) watched = resolved.heads;
        // Over its caller's share of watched heads: said in its last result, and it ends.
        const over = options.charge(watched.length);
        if (over !== undefined) {
          await push(over);
          break;
        }
        watch(watched);
        if (change?.polled === true && resolved.json === last) {
          metrics.dropped.inc({ reason: 'unchanged' });
        } else {
          if (change !== undefined) metrics.delivery.observe(Math.max(0, Date.now() - change.at) / 1000);
          last = resolved.json;
          sentAt = performance.now();
          await push(resolved.result);
          metrics.delivered.inc();
        }
        if (watched.length === 0) break;
        // The throttle first: what changes meanwhile folds into one.
        const wait = sentAt + options.throttleMs - performance.now();
        if (wait > 0) await sleep(wait, undefined, { signal: ended.signal }).catch(() => undefined);
        change = await latest.take();
        if (change === undefined) break;
        resolved = await resolutions.of(change, operation, key);
      }
      if (options.stopping()) metrics.streamsCut.inc({ reason: 'stopping' });
    } finally {
      watch([]);
      // A Repeater ends when stopped, not when its executor returns.
      stop();
    }
  });
}
