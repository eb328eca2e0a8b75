import { setTimeout as sleep } from 'node:timers/promises';
import slotOf from 'cluster-key-slot';
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { SharedStateSettings } from '../../config.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import { COMMAND_TIMEOUT_MS, quitRedis, redisClientOf } from './redis-client.js';
import { RedisOutages, type SharedStore } from './redis-outages.js';

/** One Redis connection per process, shared by the limiters, the APQ store and the response cache. */
export interface SharedRedis {
  readonly client: Redis | Cluster;
  /** Whether a command can be sent now; when not, the stores answer from process memory at once. */
  ready(): boolean;
  /** Resolves once connected, or after `timeoutMs` (the gateway serves either way). */
  whenReady(timeoutMs: number): Promise<boolean>;
  /** `items` in groups one script or multi-key command may take: on a Cluster one per hash slot (else CROSSSLOT). */
  bySlot<T>(items: readonly T[], keyOf: (item: T) => string): T[][];
  /** Calls `listener` each time Redis answers again: a reconnection, a new master, a Cluster's slots on new masters. */
  onBack(listener: () => void): void;
  /** Runs `task` as the process stops, before the connection closes (bounded: two command timeouts). */
  beforeClose(task: () => Promise<unknown>): void;
  /** A store answered from process memory (`error`: the command's failure, none when not sent): counted, warned. */
  fellBack(store: SharedStore, error?: unknown): void;
  /** The connection for events across processes, made when first asked for: pub/sub cannot share the commands'. */
  subscriber(): Redis | Cluster;
  close(): Promise<void>;
}

/** How long a stopping process lets the stores finish with Redis (an owed eviction made at last). */
const LAST_WORDS_MS = 2 * COMMAND_TIMEOUT_MS;
const START_WAIT_MS = 2_000;

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

/** A Cluster stays 'ready' as masters change: news is a node newly owning slots, not a dead master coming and going. */
function whenMastersChange(cluster: Cluster, listener: () => void): void {
  let owners: ReadonlySet<string> | undefined;
  // Owners lost within RECENT_OWNER_MS, and when: at most the Cluster's nodes.
  const lostAt = new Map<string, number>();
  cluster.on('refresh', () => {
    const now = Date.now();
    for (const [owner, lost] of lostAt) if (now - lost > RECENT_OWNER_MS) lostAt.delete(owner);
    const current = new Set(cluster.slots.flatMap((nodes) => nodes?.[0] ?? []));
    let news = false;
    // A new owner is news unless it lost its slots recently.
    for (const owner of current) if (owners !== undefined && !owners.has(owner) && !lostAt.delete(owner)) news = true;
    for (const owner of owners ?? []) if (!current.has(owner)) lostAt.set(owner, now);
    owners = current;
    if (news) listener();
  });
}

/** The shared stores' Redis (REDIS_URL), awaited two seconds at most: while down, the stores use process memory. */
export async function connectSharedState(
  settings: SharedStateSettings,
  logger: Logger,
  metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>,
): Promise<SharedRedis> {
  const client = redisClientOf(settings);
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
  const redis: SharedRedis = {
    client,
    ready: () => client.status === 'ready' && !outages.quiet(),
    async whenReady(timeoutMs) {
      if (client.status === 'ready') return true;
      let timer: NodeJS.Timeout | undefined;
      const ready = await Promise.race([
        new Promise<boolean>((resolve) => client.once('ready', () => resolve(true))),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs))),
      ]);
      clearTimeout(timer);
      return ready;
    },
    bySlot: (items, keyOf) =>
      client instanceof Cluster ? groupBySlot(items, keyOf) : items.length === 0 ? [] : [[...items]],
    onBack: (listener) => void comeBack.add(listener),
    beforeClose: (task) => void lastWords.add(task),
    fellBack: (store, error) => outages.fellBack(store, error, client.status === 'ready'),
    // Its outages are the commands' connection's to tell: it reconnects on its own.
    subscriber: () => (subscriber ??= redisClientOf(settings, 'events').on('error', () => {})),
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
  await redis.whenReady(START_WAIT_MS);
  return redis;
}

/** `stamped`'s `<expiry ms>:<stored ms>:<text>` or an older build's `<expiry ms>:<text>`; a placeholder: undefined. */
export function readStamped(
  value: string | null,
): { readonly expiresAt: number; readonly storedAt: number | undefined; readonly text: string } | undefined {
  const colon = value?.indexOf(':') ?? -1;
  const expiresAt = Number(value?.slice(0, colon));
  if (value === null || colon === -1 || !Number.isSafeInteger(expiresAt)) return undefined;
  const second = value.indexOf(':', colon + 1);
  const storedAt = second === -1 ? Number.NaN : Number(value.slice(colon + 1, second));
  return Number.isSafeInteger(storedAt)
    ? { expiresAt, storedAt, text: value.slice(second + 1) }
    : { expiresAt, storedAt: undefined, text: value.slice(colon + 1) };
}

export const stamped = (expiresAt: number, storedAt: number, text: string): string =>
  `${expiresAt}:${storedAt}:${text}`;
