import { Repeater, SlidingBuffer } from '@repeaterjs/repeater';
import type { HeadChange } from '../../domain/head-changes.js';
import type { HeadEvents } from './head-events.js';

/** Repeater's sliding buffer of one (the latest change waits, the one before it is dropped), telling each drop. */
class FoldingBuffer extends SlidingBuffer {
  constructor(private readonly onFolded: () => void) {
    super(1);
  }

  override add(change: unknown): void {
    if (!this.empty) this.onFolded();
    super.add(change);
  }
}

/** The fold of changes not yet taken: the latest, unless a deletion came (which stays, and ends the watch). */
export const folded = (waiting: HeadChange | undefined, change: HeadChange): HeadChange =>
  waiting?.deleted === true ? waiting : change;

export interface ChangeQueueOptions {
  /** What the subscriber missed before it subscribed (a reconnecting SSE client's): taken first. */
  readonly missed?: Promise<HeadChange | undefined> | undefined;
  /** Told once the subscriber stops taking changes. */
  readonly onFinish: () => void;
  /** Told of each change folded into one still waiting (metrics). */
  readonly onFolded: () => void;
}

/**
 * The changes to head `id` as a subscriber takes them: a slow one has the latest waiting at most (each says "read it
 * again"), no queue grows; nothing after a deletion. Listening starts as it first asks and ends as it stops.
 */
export function changeQueue(
  listen: HeadEvents['listen'],
  id: string,
  options: ChangeQueueOptions,
): AsyncIterableIterator<HeadChange> {
  return new Repeater<HeadChange>(async (push, stop) => {
    let deleted = false;
    const take = (change: HeadChange) => {
      if (deleted) return;
      deleted = change.deleted === true;
      void push(change);
    };
    const unlisten = listen(id, take);
    void options.missed?.then((change) => change !== undefined && take(change));
    await stop;
    unlisten();
    options.onFinish();
  }, new FoldingBuffer(options.onFolded));
}
