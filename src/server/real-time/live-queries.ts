import { setTimeout as sleep } from 'node:timers/promises';
import { Repeater } from '@repeaterjs/repeater';
import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import type { RealTimeMetrics } from '../instruments/real-time-metrics.js';
import type { PreparedOperationState } from '../operation-state.js';
import { folded } from './change-queue.js';
import { type EventResolutions, headsRead, sharingKey } from './event-resolutions.js';
import type { HeadEvents } from './head-events.js';
import type { HeadPolling } from './head-polling.js';
import type { WatchCharge } from './ledger.js';

export interface LiveQueryOptions {
  readonly listen: HeadEvents['listen'];
  readonly polling: HeadPolling;
  readonly resolutions: EventResolutions;
  readonly metrics: RealTimeMetrics;
  /** SUBSCRIPTION_LIVE_THROTTLE_MS: the least time between two results. */
  readonly throttleMs: number;
  /** Whether the process is stopping: a stream ended then is cut for that reason. */
  readonly stopping: () => boolean;
  /** Charges the heads it watches to its caller's share (subscriptions.ts): a refusal when they no longer fit. */
  readonly charge: WatchCharge;
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

/** What a live query watches after a run: the heads it read, or, when it read none as it failed, those before. */
const watchedAfter = (result: ExecutionResult, heads: readonly string[], before: readonly string[]) =>
  heads.length === 0 && result.errors?.length ? before : heads;

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
 * whole result again each time a head it read changes (a write through any replica, or polled), at most once every
 * `throttleMs` (changes meanwhile folded). Later results are resolved as subscription events (event-resolutions.ts),
 * and the heads they read that exist become what it watches. A run that fails or is refused is sent and keeps what was
 * watched, so the next change is sent; a query watching nothing could never be sent again, and ends after that result.
 * A polled change that reads the same is not sent. Ends when its client leaves or the process stops.
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
      let watched = watchedAfter(result, headsRead(operation), []);
      // Over its caller's share of watched heads: said in its last result, and it ends.
      const refusal = options.charge(watched.length);
      if (refusal !== undefined) return void (await push(refusal));
      watch(watched);
      let last = JSON.stringify(result);
      let sentAt = performance.now();
      await push(result);
      metrics.delivered.inc();
      while (watched.length > 0) {
        // The throttle first: what changes meanwhile folds into one.
        const wait = sentAt + options.throttleMs - performance.now();
        if (wait > 0) await sleep(wait, undefined, { signal: ended.signal }).catch(() => undefined);
        const change = await latest.take();
        if (change === undefined) break;
        const resolved = await resolutions.of(change, operation, key);
        watched = watchedAfter(resolved.result, resolved.heads, watched);
        const over = options.charge(watched.length);
        if (over !== undefined) {
          await push(over);
          break;
        }
        watch(watched);
        if (change.polled === true && resolved.json === last) {
          metrics.dropped.inc({ reason: 'unchanged' });
          continue;
        }
        metrics.delivery.observe(Math.max(0, Date.now() - change.at) / 1000);
        last = resolved.json;
        sentAt = performance.now();
        await push(resolved.result);
        metrics.delivered.inc();
      }
      if (options.stopping()) metrics.streamsCut.inc({ reason: 'stopping' });
    } finally {
      watch([]);
      // A Repeater ends when stopped, not when its executor returns.
      stop();
    }
  });
}
