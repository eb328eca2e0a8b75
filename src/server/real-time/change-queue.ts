import type { HeadChange } from '../../domain/head-changes.js';
import type { HeadEvents } from './head-events.js';

/** An iteration's end. */
export const done: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/** A subscriber's end of a head's changes: those not yet taken folded into one (the latest; a deletion kept). */
export interface ChangeQueue extends AsyncIterableIterator<HeadChange> {
  finish(): void;
}

export interface ChangeQueueOptions {
  /** What the subscriber missed before it subscribed (a reconnecting SSE client's): taken first. */
  readonly missed?: Promise<HeadChange | undefined> | undefined;
  readonly onFinish: (queue: ChangeQueue) => void;
  /** Told of each change folded into one still waiting, for metrics. */
  readonly onFolded: () => void;
}

/**
 * The changes to head `id`, as a subscriber takes them. A subscriber that takes them slower than
 * they come has one waiting at most: the latest (a deletion stays), since each event only says
 * "read it again". So no subscriber's queue grows, however slow.
 */
export function changeQueue(listen: HeadEvents['listen'], id: string, options: ChangeQueueOptions): ChangeQueue {
  let pending: HeadChange | undefined;
  let waiting: ((step: IteratorResult<HeadChange, undefined>) => void) | undefined;
  let finished = false;
  const deliver = () => {
    if (waiting === undefined || (pending === undefined && !finished)) return;
    const resolve = waiting;
    waiting = undefined;
    if (pending === undefined) return resolve(done);
    const change = pending;
    pending = undefined;
    resolve({ done: false, value: change });
  };
  const take = (change: HeadChange) => {
    if (finished) return;
    if (pending !== undefined) options.onFolded();
    pending = pending?.deleted === true ? pending : change;
    deliver();
  };
  const unlisten = listen(id, take);
  const queue: ChangeQueue = {
    [Symbol.asyncIterator]: () => queue,
    next: () =>
      new Promise((resolve) => {
        waiting = resolve;
        deliver();
      }),
    return: () => {
      queue.finish();
      return Promise.resolve(done);
    },
    finish() {
      if (finished) return;
      finished = true;
      pending = undefined;
      unlisten();
      options.onFinish(queue);
      deliver();
    },
  };
  void options.missed?.then((change) => change !== undefined && take(change));
  return queue;
}
