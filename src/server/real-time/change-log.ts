import { LRUCache } from 'lru-cache';
import type { HeadChange } from '../../domain/head-changes.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';

/** Changes kept per head at most: a client that missed more is sent the head as it is now. */
const CHANGES_PER_HEAD = 64;
/** Heads one process keeps in memory at most (least recently changed dropped first), their bytes, and one change's. */
const HEADS_IN_MEMORY = 10_000;
const MEMORY_BYTES = 8 * 1024 * 1024;
const BYTES_PER_CHANGE = 160;

/** An event id: `<ms>-<sequence>`, as Redis Streams make them. */
const eventIdPattern = /^(\d{1,16})-(\d{1,16})$/;

/** What the log keeps of a change: a plain copy, never the object events are resolved against. */
type Kept = Pick<HeadChange, 'eventId' | 'at' | 'deleted' | 'polled'>;
type Fields = Omit<Kept, 'eventId'>;

const fieldsOf = (change: Omit<HeadChange, 'eventId'>): Fields => ({
  at: change.at,
  ...(change.deleted ? { deleted: true } : {}),
  ...(change.polled ? { polled: true } : {}),
});

/** The latest of `changes`, or the deletion among them, as a change of head `id`. */
function folded(id: string, changes: readonly Kept[]): HeadChange | undefined {
  const last = changes.find((change) => change.deleted === true) ?? changes.at(-1);
  return last === undefined ? undefined : { ...last, id };
}

export interface ChangeLog {
  /** Logs a change with its event id: Redis's with REDIS_URL (one order for the fleet), else or failing a local one. */
  append(change: Omit<HeadChange, 'eventId'>): Promise<HeadChange>;
  /** Keeps a change another worker logged (WORKERS>1 without Redis: each keeps what it hears). */
  keep(change: HeadChange): void;
  /**
   * What a subscriber whose last event was `lastEventId` missed of head `id`, folded into one change (a deletion kept);
   * undefined when it missed nothing; the head as it is now when the log cannot tell (an eviction, an outage, ...).
   */
  missed(id: string, lastEventId: string): Promise<HeadChange | undefined>;
}

/** The key of head `id`'s log in Redis: a stream, its own hash slot. */
const logKey = (id: string) => `gw:log:{${id}}`;
/** When changes last may have gone unlogged (ms): a resume from before it is sent the head as it is now. */
const GAP_KEY = 'gw:log:gap';

/** This process's memory of the changes (without REDIS_URL): plain copies, bounded by heads, bytes and the window. */
function memoryLog(replayMs: number, catchUp: (id: string) => HeadChange) {
  const memory = new LRUCache<string, Kept[]>({
    max: HEADS_IN_MEMORY,
    maxSize: MEMORY_BYTES,
    sizeCalculation: (changes) => BYTES_PER_CHANGE * changes.length,
    ttl: Math.max(replayMs, 1),
    ttlAutopurge: false,
  });
  return {
    keep: (change: HeadChange): void => {
      if (replayMs === 0) return;
      const since = Date.now() - replayMs;
      const kept = (memory.get(change.id) ?? []).filter((old) => old.at > since);
      kept.push({ eventId: change.eventId, ...fieldsOf(change) });
      memory.set(change.id, kept.slice(-CHANGES_PER_HEAD));
    },
    missed: (id: string, lastEventId: string): HeadChange | undefined => {
      const kept = memory.get(id) ?? [];
      const at = kept.findIndex((change) => change.eventId === lastEventId);
      return at === -1 ? catchUp(id) : folded(id, kept.slice(at + 1));
    },
  };
}

/** REDIS_URL's log: a Redis Stream per head (its entries' ids the events' ids), and the gap a Redis outage leaves. */
function redisLog(
  redis: SharedRedis,
  replayMs: number,
  now: (change: Omit<HeadChange, 'eventId'>) => HeadChange,
  catchUp: (id: string) => HeadChange,
) {
  /** Changes Redis did not take since it last answered: once it does, the log is marked incomplete until then. */
  let unlogged = false;
  redis.onBack(() => {
    if (!unlogged) return;
    unlogged = false;
    void redis.client.set(GAP_KEY, String(Date.now()), 'PX', Math.max(replayMs, 1)).catch(() => {
      unlogged = true;
    });
  });
  return {
    append: async (change: Omit<HeadChange, 'eventId'>): Promise<HeadChange> => {
      const key = logKey(change.id);
      try {
        if (!redis.ready()) throw new Error('Redis is not ready');
        const fields = JSON.stringify(fieldsOf(change));
        const [added] = (await redis.client
          .multi()
          .xadd(key, 'MAXLEN', '~', String(CHANGES_PER_HEAD), '*', 'c', fields)
          .xtrim(key, 'MINID', '~', String(Date.now() - replayMs))
          .pexpire(key, replayMs)
          .exec()) as [[Error | null, string]];
        if (added[0] !== null) throw added[0];
        return { ...change, eventId: added[1] };
      } catch {
        unlogged = true;
        return now(change);
      }
    },
    missed: async (id: string, lastEventId: string, seenAt: number): Promise<HeadChange | undefined> => {
      if (!redis.ready()) return catchUp(id);
      try {
        const [entries, gap] = await Promise.all([
          redis.client.xrange(logKey(id), lastEventId, '+'),
          redis.client.get(GAP_KEY),
        ]);
        if (entries[0]?.[0] !== lastEventId || Number(gap ?? 0) > seenAt) return catchUp(id);
        const after = entries
          .slice(1)
          .map(([eventId, fields]) => ({ eventId, ...(JSON.parse(fields[1] ?? '{}') as Fields) }));
        return folded(id, after);
      } catch {
        return catchUp(id);
      }
    },
  };
}

/**
 * The changes of the last `replayMs` per head, so an SSE client reconnecting with `Last-Event-ID` gets what it missed,
 * from any replica: with REDIS_URL, a Redis Stream per head (trimmed as written, expiring with its last change).
 */
export function changeLog(options: { readonly replayMs: number; readonly redis?: SharedRedis | undefined }): ChangeLog {
  const { replayMs, redis } = options;
  // Local event ids as Redis Streams make theirs: increasing, and never ahead of the clock.
  let lastMs = 0;
  let sequence = 0;
  const nextId = () => {
    const time = Date.now();
    sequence = time > lastMs ? 0 : sequence + 1;
    lastMs = Math.max(time, lastMs);
    return `${lastMs}-${sequence}`;
  };
  const now = (change: Omit<HeadChange, 'eventId'>): HeadChange => ({ ...change, eventId: nextId() });
  const catchUp = (id: string): HeadChange => ({ id, at: Date.now(), eventId: nextId() });
  const memory = memoryLog(replayMs, catchUp);
  const stream = redis === undefined ? undefined : redisLog(redis, replayMs, now, catchUp);
  return {
    async append(change) {
      if (replayMs !== 0 && stream !== undefined) return stream.append(change);
      const logged = now(change);
      memory.keep(logged); // Nothing kept when replayMs is 0.
      return logged;
    },
    keep: memory.keep,
    async missed(id, lastEventId) {
      // NaN (not an event id) is never in the window.
      const seenAt = Number(eventIdPattern.exec(lastEventId)?.[1] ?? Number.NaN);
      if (!(seenAt > Date.now() - replayMs)) return catchUp(id);
      return stream === undefined ? memory.missed(id, lastEventId) : stream.missed(id, lastEventId, seenAt);
    },
  };
}
