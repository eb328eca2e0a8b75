import { setTimeout as sleep } from 'node:timers/promises';
import slotOf from 'cluster-key-slot';
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { SharedStateSettings } from '../../config.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import { COMMAND_TIMEOUT_MS, quitRedis, redisClientOf } from './redis-client.js';
import { RedisOutages, type SharedStore } from './redis-outages.js';

/**
 * One Redis connection per process (one client per topology), shared by the limiters, the APQ store and the response
 * cache.
 */
export interface SharedRedis {
  /** One node or a Sentinel-watched master (`Redis`), or a Cluster: the same commands either way. */
  readonly client: Redis | Cluster;
  /** Whether a command can be sent now; when not, the stores answer from process memory at once. */
  ready(): boolean;
  /** Resolves once connected, or after `timeoutMs` (the gateway serves either way). */
  whenReady(timeoutMs: number): Promise<boolean>;
  /**
   * `items` in groups whose keys (`keyOf`) may go in one script or multi-key command: on a
   * Cluster one group per hash slot (Redis refuses a command across slots: CROSSSLOT), on one
   * node or a Sentinel-watched master all of them in one group.
   */
  bySlot<T>(items: readonly T[], keyOf: (item: T) => string): T[][];
  /**
   * Calls `listener` each time Redis answers again after a loss: a reconnection, a new master, a Cluster's slots on new
   * masters.
   */
  onBack(listener: () => void): void;
  /** Runs `task` as the process stops, before the connection closes (bounded: two command timeouts). */
  beforeClose(task: () => Promise<unknown>): void;
  /**
   * A store answered from process memory because Redis could not (`error`: the command's failure;
   * none when it was not sent): counted by reason, and warned about.
   */
  fellBack(store: SharedStore, error?: unknown): void;
  /**
   * The connection in subscriber mode for events across processes (made when first asked for,
   * closed with the rest): pub/sub cannot share the commands' connection; on a Cluster its
   * channels are sharded.
   */
  subscriber(): Redis | Cluster;
  close(): Promise<void>;
}

/** How long a stopping process lets the stores finish with Redis (an owed eviction made at last). */
const LAST_WORDS_MS = 2 * COMMAND_TIMEOUT_MS;

/**
 * `items` in one group per hash slot of their keys (`keyOf`): what one script or multi-key command on a Cluster may
 * take.
 */
function groupBySlot<T>(items: readonly T[], keyOf: (item: T) => string): T[][] {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const slot = slotOf(keyOf(item));
    const group = groups.get(slot);
    if (group === undefined) groups.set(slot, [item]);
    else group.push(item);
  }
  return [...groups.values()];
}

/** A node that owns slots again within this of losing them is no news (a refresh's stale view, not a failover). */
const RECENT_OWNER_MS = 30_000;

/**
 * Calls `listener` when a Cluster's masters are replaced: it stays 'ready' meanwhile, and the news
 * is its slots owned by a node that did not own any (a replica promoted), or lost them more than
 * RECENT_OWNER_MS ago, seen as its slots are refreshed. Not its nodes coming and going: a dead
 * master is dropped and added again at each refresh until it is replaced, and a node that has not
 * heard of the promotion yet may answer the old owners for a refresh or two.
 */
function whenMastersChange(cluster: Cluster, listener: () => void): void {
  let owners: ReadonlySet<string> | undefined;
  // Owners gone within RECENT_OWNER_MS, and when: at most the Cluster's nodes (a node whose address changes for good is
  // forgotten).
  const lostAt = new Map<string, number>();
  cluster.on('refresh', () => {
    const now = Date.now();
    for (const [owner, lost] of lostAt) if (now - lost > RECENT_OWNER_MS) lostAt.delete(owner);
    const current = new Set(
      cluster.slots.map((nodes) => nodes?.[0]).filter((node): node is string => node !== undefined),
    );
    let news = false;
    for (const owner of current) {
      if (owners === undefined || owners.has(owner)) continue;
      const lost = lostAt.get(owner);
      if (lost === undefined || now - lost > RECENT_OWNER_MS) news = true;
      lostAt.delete(owner);
    }
    for (const owner of owners ?? []) if (!current.has(owner)) lostAt.set(owner, now);
    owners = current;
    if (news) listener();
  });
}

/** Resolves true once `client` is connected, or false after `timeoutMs`. */
async function readyWithin(client: Redis | Cluster, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return true;
  let timer: NodeJS.Timeout | undefined;
  const ready = await Promise.race([
    new Promise<boolean>((resolve) => client.once('ready', () => resolve(true))),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
  ]);
  clearTimeout(timer);
  return ready;
}

/**
 * Connects to Redis for the shared stores. The gateway never waits on Redis: while it is
 * unreachable, commands fail at once (no offline queue, no retries per command) and the stores
 * fall back to process memory; ioredis keeps reconnecting (backoff up to 2 s; to the master the
 * Sentinels name, or to the Cluster's nodes as its slots say) and they use it again as soon as
 * it answers. A warning when it goes (or refuses a write), at most one a minute, and one line
 * when it is back (`RedisOutages`).
 */
function connectRedis(
  settings: SharedStateSettings,
  logger: Logger,
  metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>,
): SharedRedis {
  const client = redisClientOf(settings);
  const cluster = client instanceof Cluster;
  const outages = new RedisOutages(logger, metrics);
  const comeBack = new Set<() => void>();
  const lastWords = new Set<() => Promise<unknown>>();
  let subscriber: Redis | Cluster | undefined;
  const back = () => {
    outages.back();
    for (const listener of comeBack) listener();
  };
  client.on('error', (error) => outages.lost(error));
  client.on('close', () => outages.lost());
  client.on('ready', back);
  if (client instanceof Cluster) whenMastersChange(client, back);
  return {
    client,
    ready: () => client.status === 'ready' && !outages.quiet(),
    whenReady: (timeoutMs) => readyWithin(client, timeoutMs),
    bySlot: (items, keyOf) => (cluster ? groupBySlot(items, keyOf) : items.length === 0 ? [] : [[...items]]),
    onBack(listener) {
      comeBack.add(listener);
    },
    beforeClose(task) {
      lastWords.add(task);
    },
    fellBack(store, error) {
      outages.fellBack(store, error, client.status === 'ready');
    },
    subscriber() {
      if (subscriber === undefined) {
        subscriber = redisClientOf(settings, 'events');
        // Its outages are the commands' connection's to tell: it reconnects on its own.
        subscriber.on('error', () => {});
      }
      return subscriber;
    },
    async close() {
      // What the stores still owe Redis (an eviction a cut held back), for as long as a command may take.
      if (lastWords.size > 0)
        await Promise.race([
          Promise.allSettled([...lastWords].map((task) => task())),
          sleep(LAST_WORDS_MS, undefined, { ref: false }),
        ]);
      comeBack.clear();
      // Quitting is no outage: nothing to warn about.
      client.removeAllListeners('error');
      client.removeAllListeners('close');
      client.on('error', () => {});
      await Promise.all([quitRedis(client), subscriber === undefined ? undefined : quitRedis(subscriber)]);
    },
  };
}

/**
 * A value the stores keep with its expiry and the time it was stored in front
 * (`<expiry ms>:<stored ms>:<text>`), so that one read says all three: what `stamped` writes, or
 * undefined for anything else (a write's placeholder). A value an older build kept
 * (`<expiry ms>:<text>`, its text JSON) reads without its time stored.
 */
export function readStamped(
  value: string | null,
): { readonly expiresAt: number; readonly storedAt: number | undefined; readonly text: string } | undefined {
  const colon = value === null ? -1 : value.indexOf(':');
  const expiresAt = Number(value?.slice(0, colon));
  if (colon === -1 || !Number.isSafeInteger(expiresAt)) return undefined;
  const second = value!.indexOf(':', colon + 1);
  const storedAt = second === -1 ? Number.NaN : Number(value!.slice(colon + 1, second));
  return Number.isSafeInteger(storedAt)
    ? { expiresAt, storedAt, text: value!.slice(second + 1) }
    : { expiresAt, storedAt: undefined, text: value!.slice(colon + 1) };
}

export const stamped = (expiresAt: number, storedAt: number, text: string): string =>
  `${expiresAt}:${storedAt}:${text}`;

/** How long a starting process waits for Redis before it serves from process memory. */
const START_WAIT_MS = 2_000;

/**
 * The process's Redis for the shared stores (REDIS_URL), its fallbacks counted in `metrics`:
 * resolves once connected or after two seconds, whichever comes first (the gateway serves either way).
 */
export async function connectSharedState(
  settings: SharedStateSettings,
  logger: Logger,
  metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>,
): Promise<SharedRedis> {
  const redis = connectRedis(settings, logger, metrics);
  await redis.whenReady(START_WAIT_MS);
  return redis;
}
