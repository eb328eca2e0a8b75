import { createHash, randomUUID } from 'node:crypto';
import { ROOT_CONTEXT } from '@opentelemetry/api';
import pLimit from 'p-limit';
import type { HeadChange } from '../../domain/head-changes.js';
import { UpstreamError } from '../../upstream/errors.js';
import { getHeadExt } from '../../upstream/heads.js';
import { OperationGuard } from '../../upstream/operation-guard.js';
import type { Upstream } from '../../upstream/upstream.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';

export interface HeadPollingOptions {
  readonly upstream: Upstream;
  /** Where a change found is told (head-events.ts: to every watcher, and kept for replay). */
  readonly publish: (change: Omit<HeadChange, 'eventId' | 'at'>) => void;
  /** SUBSCRIPTION_POLL_MS: how often each watched head is read; 0: never (only writes through the gateway are seen). */
  readonly intervalMs: number;
  /** Reads under way at once at most: polling's share of the upstream pool. */
  readonly concurrency: number;
  /** REDIS_URL's connection: one replica reads each head per interval (a lease), the last read's digest shared. */
  readonly redis?: SharedRedis | undefined;
  readonly onRead?: (outcome: PollOutcome) => void;
}

/** What a poll read found: the head as before, changed, gone (404), or nothing (the read failed). */
export type PollOutcome = 'unchanged' | 'changed' | 'deleted' | 'failed';

export interface HeadPolling {
  /** Watches head `id` until the returned function is called: read every interval while anyone watches it. */
  watch(id: string): () => void;
}

/** A read that failed puts its head's next read off by twice the last wait, up to this many intervals. */
const MAX_BACKOFF_INTERVALS = 8;
/** How long a head's last digest is kept once nobody reads it (in intervals). */
const DIGEST_INTERVALS = 20;

interface Watched {
  watchers: number;
  /** The last read's digest, where Redis does not keep it. */
  digest: string | undefined;
  /** No read before this (a failed one backs off). */
  notBefore: number;
  backoff: number;
}

const digestOf = (body: unknown) => createHash('sha256').update(JSON.stringify(body)).digest('base64url');

/** Takes head `id`'s lease for the interval (NX), or answers the digest its holder shared: one round trip, one slot. */
const leaseScript = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return redis.call('GET', KEYS[2]) or 0`;

interface PollCommands {
  gwPollLease(lease: string, digest: string, replica: string, ms: number): Promise<1 | 0 | string>;
}

/** Polling shared through Redis: a lease per head per interval, and the last digest (also kept here, if Redis goes). */
function pollState(redis: SharedRedis | undefined, intervalMs: number) {
  const replica = randomUUID();
  const live = () => redis?.ready();
  const digestKey = (id: string) => `gw:poll:{${id}}:digest`;
  redis?.client.defineCommand('gwPollLease', { numberOfKeys: 2, lua: leaseScript });
  const commands = redis?.client as unknown as PollCommands | undefined;
  return {
    /** Whether this replica reads `id` this interval; when another does, its digest becomes this replica's baseline. */
    async leased(id: string, head: Watched): Promise<boolean> {
      if (!live()) return true;
      // Redis did not answer: this replica reads (every replica may, until Redis is back).
      const lease = await commands!
        .gwPollLease(`gw:poll:{${id}}`, digestKey(id), replica, Math.max(intervalMs - 50, 1))
        .catch(() => 1 as const);
      if (lease === 1) return true;
      if (typeof lease === 'string') head.digest = lease;
      return false;
    },
    /** The last read's digest (the fleet's, with Redis), `digest` kept in its place. */
    async swap(id: string, head: Watched, digest: string): Promise<string | undefined> {
      const before = live() ? ((await redis!.client.get(digestKey(id)).catch(() => null)) ?? head.digest) : head.digest;
      head.digest = digest;
      if (live())
        void redis!.client.set(digestKey(id), digest, 'PX', intervalMs * DIGEST_INTERVALS).catch(() => undefined);
      return before;
    },
  };
}

/** One read of head `id`, against the last read's digest: what it found, a change or a deletion published. */
async function readHead(options: HeadPollingOptions, shared: ReturnType<typeof pollState>, id: string, head: Watched) {
  const { upstream, publish, intervalMs } = options;
  const caller = upstream.forRequest({
    requestId: `poll:${id}`,
    authorization: undefined,
    signal: new AbortController().signal,
    guard: new OperationGuard({ budget: 2, deadlineMs: intervalMs }),
    trace: ROOT_CONTEXT,
  });
  let digest: string;
  try {
    digest = digestOf(await getHeadExt(caller, id));
  } catch (error) {
    if (error instanceof UpstreamError && error.code === 'NOT_FOUND') {
      publish({ id, deleted: true, polled: true });
      return 'deleted';
    }
    return 'failed';
  }
  const before = await shared.swap(id, head, digest);
  if (before === undefined || before === digest) return 'unchanged';
  publish({ id, polled: true });
  return 'changed';
}

/**
 * Changes made outside the gateway, found by reading each watched head every `intervalMs`: one read per head per
 * interval for the whole fleet, however many subscribers. The read is Get Head Ext By Id, variant A (contract 4.5):
 * every field of the head, `head_metadata` and `updated_at` included; a change to the hair's variant-B-only fields
 * (`hair_metadata`, `user_id`) alone is not seen. At background priority: no caller's token (Get Head by ID declares
 * no scheme), budget or limit; the timer stops with the last watcher.
 */
export function headPolling(options: HeadPollingOptions): HeadPolling {
  const { intervalMs } = options;
  const heads = new Map<string, Watched>();
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  const reads = pLimit(options.concurrency);
  const shared = pollState(options.redis, intervalMs);
  const poll = async (id: string, head: Watched) => {
    if (head.notBefore > performance.now() || !(await shared.leased(id, head))) return;
    const outcome = await readHead(options, shared, id, head);
    options.onRead?.(outcome);
    head.backoff = outcome === 'failed' ? Math.min(Math.max(head.backoff * 2, 1), MAX_BACKOFF_INTERVALS) : 0;
    head.notBefore = performance.now() + head.backoff * intervalMs - intervalMs / 2;
  };

  /** One interval's reads, `concurrency` at a time; a tick that finds the last still running is skipped. */
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      await Promise.all([...heads].map(([id, head]) => reads(() => poll(id, head)).catch(() => undefined)));
    } finally {
      running = false;
    }
  };

  return {
    watch(id) {
      if (intervalMs === 0) return () => undefined;
      const head = heads.get(id);
      if (head !== undefined) head.watchers++;
      else {
        const watched: Watched = { watchers: 1, digest: undefined, notBefore: 0, backoff: 0 };
        heads.set(id, watched);
        // Its baseline read at once (or the fleet's digest taken), so a change in the first interval is one.
        void poll(id, watched).catch(() => undefined);
      }
      timer ??= setInterval(() => void tick(), intervalMs).unref();
      let unwatched = false;
      return () => {
        if (unwatched) return;
        unwatched = true;
        const watched = heads.get(id);
        if (watched === undefined || --watched.watchers > 0) return;
        heads.delete(id);
        if (heads.size === 0) {
          clearInterval(timer);
          timer = undefined;
        }
      };
    },
  };
}
