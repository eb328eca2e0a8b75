import { LRUCache } from 'lru-cache';
import type { HeadChange } from '../../domain/head-changes.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';

/** Changes kept per head at most: a client that missed more is sent the head as it is now all the same. */
const CHANGES_PER_HEAD = 64;

/** Heads whose changes one process keeps in memory at most (the least recently changed dropped first). */
const HEADS_IN_MEMORY = 10_000;

export interface ChangeLog {
  /** Keeps a change published for `replayMs`. */
  append(change: HeadChange): void;
  /**
   * What a subscriber that last saw the change of `after` (its SSE event id: the change's `at`)
   * missed of head `id`, folded into one change (the latest; a deletion kept): undefined when it
   * missed nothing. One that last saw a change older than the log keeps may have missed one: it
   * gets the head as it is now.
   */
  missed(id: string, after: number): Promise<HeadChange | undefined>;
}

/** The latest of `changes`, or the deletion among them. */
const folded = (changes: readonly HeadChange[]): HeadChange | undefined => changes.find((change) => change.deleted === true) ?? changes.at(-1);

/**
 * The changes of the last `replayMs` per head, so an SSE client that reconnects with
 * `Last-Event-ID` gets what it missed, from any replica: in Redis with REDIS_URL (a sorted set per
 * head by publication time, trimmed as it is written, expiring with its last change), else in
 * this process's memory (bounded by heads and by changes per head). While Redis does not answer, a
 * reconnecting subscriber is sent the head as it is now (it may have missed a change).
 */
export function changeLog(options: { readonly replayMs: number; readonly redis?: SharedRedis | undefined }): ChangeLog {
  const { replayMs, redis } = options;
  const memory = new LRUCache<string, HeadChange[]>({ max: HEADS_IN_MEMORY });
  const key = (id: string) => `gw:log:{${id}}`;
  const catchUp = (id: string): HeadChange => ({ id, at: Date.now() });
  return {
    append(change) {
      if (replayMs === 0) return;
      if (redis !== undefined) {
        if (!redis.ready()) return;
        void redis.client
          .multi()
          .zadd(key(change.id), change.at, JSON.stringify(change))
          .zremrangebyscore(key(change.id), '-inf', change.at - replayMs)
          .zremrangebyrank(key(change.id), 0, -CHANGES_PER_HEAD - 1)
          .pexpire(key(change.id), replayMs)
          .exec()
          .catch(() => undefined);
        return;
      }
      const kept = (memory.get(change.id) ?? []).filter((old) => old.at > change.at - replayMs);
      kept.push(change);
      memory.set(change.id, kept.slice(-CHANGES_PER_HEAD));
    },
    async missed(id, after) {
      if (!(after > Date.now() - replayMs)) return catchUp(id);
      if (redis === undefined) return folded((memory.get(id) ?? []).filter((change) => change.at > after));
      if (!redis.ready()) return catchUp(id);
      try {
        const found = await redis.client.zrangebyscore(key(id), `(${after}`, '+inf');
        return folded(found.map((member) => JSON.parse(member) as HeadChange));
      } catch {
        return catchUp(id);
      }
    },
  };
}
