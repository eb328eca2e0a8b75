import type { PubSub } from '@graphql-yoga/subscription';
import type { HeadChange } from '../../domain/head-changes.js';
import type { HeadTopics } from './head-events.js';

/** An iteration's end. */
export const done: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/** A subscriber's end of a head's changes: those not yet taken folded into one (the latest; a deletion kept). */
export interface ChangeQueue extends AsyncIterableIterator<HeadChange> {
  finish(): void;
}

/**
 * The changes to head `id`, as a subscriber takes them. A subscriber that takes them slower than
 * they come has one waiting at most: the latest (a deletion stays), since each event only says
 * "read it again". So no subscriber's queue grows, however slow.
 */
export function changeQueue(pubsub: PubSub<HeadTopics>, id: string, onFinish: (queue: ChangeQueue) => void, onFolded: () => void): ChangeQueue {
  const events = pubsub.subscribe('headChanged', id)[Symbol.asyncIterator]();
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
      void events.return?.();
      onFinish(queue);
      deliver();
    },
  };
  void (async () => {
    for (let step = await events.next(); !step.done && !finished; step = await events.next()) {
      if (pending !== undefined) onFolded();
      pending = pending?.deleted === true ? pending : step.value;
      deliver();
    }
  })();
  return queue;
}
