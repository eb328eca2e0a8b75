import { createPubSub } from '@graphql-yoga/subscription';
import { type Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { quitRedis, redisClientOf } from '../src/server/shared-state/redis-client.js';
import { redisEventTarget } from '../src/server/shared-state/redis-events.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { type RedisClusterProcess, startRedisCluster } from './support/redis-cluster.js';
import { describeWithRedis } from './support/services.js';
import { until } from './support/until.js';

/*
 * Events across processes (server/shared-state/redis-events.ts): createPubSub over a Redis event
 * target, two "processes" (each its own connections and pub/sub) on one real Redis node and on a
 * Cluster of three masters (sharded pub/sub); an event reaches the other process once and its own
 * once, a topic nobody listens to is no channel, and a subscription made while Redis was down
 * holds once it is back.
 */

type Topics = { headChanged: [id: string, change: { id: string; deleted: boolean }] };

interface Replica {
  readonly pubsub: ReturnType<typeof createPubSub<Topics>>;
  readonly clients: (Redis | Cluster)[];
  readonly failures: unknown[];
  close(): void;
}

function replica(url: string): Replica {
  const settings = loadConfig({ REDIS_URL: url }).redis!;
  const subscriber = redisClientOf(settings, 'events');
  const publisher = settings.topology.kind === 'cluster' ? subscriber : redisClientOf(settings);
  const failures: unknown[] = [];
  const target = redisEventTarget({ publisher, subscriber, onPublishFailed: (error) => failures.push(error) });
  const clients = publisher === subscriber ? [subscriber] : [publisher, subscriber];
  return {
    pubsub: createPubSub<Topics>({ eventTarget: target as never }),
    clients,
    failures,
    close() {
      target.close();
      for (const client of clients) void quitRedis(client);
    },
  };
}

/** The events of `id` that `r` receives, gathered as they come. */
function listen(r: Replica, id: string): { events: { id: string; deleted: boolean }[]; stop(): Promise<unknown> } {
  const events: { id: string; deleted: boolean }[] = [];
  const iterator = r.pubsub.subscribe('headChanged', id)[Symbol.asyncIterator]();
  const pump = async () => {
    for (;;) {
      const next = await iterator.next();
      if (next.done) return;
      events.push(next.value);
    }
  };
  void pump();
  return { events, stop: () => iterator.return!() };
}

const ready = (r: Replica) => until(() => r.clients.every((client) => client.status === 'ready'), 'connected');

describeWithRedis('events across processes over one Redis node', () => {
  let redis: RedisProcess;
  let inspector: Redis;
  let a: Replica;
  let b: Replica;
  /** How many connections listen on the channel of head `id`. */
  const listeners = async (id: string) =>
    Number(((await inspector.pubsub('NUMSUB', `gw:ev:headChanged:${id}`)) as unknown[])[1]);
  beforeAll(async () => {
    redis = await startRedis();
    inspector = new Redis(redis.url, { maxRetriesPerRequest: null });
    [a, b] = [replica(redis.url), replica(redis.url)];
    await Promise.all([ready(a), ready(b)]);
  });
  afterAll(async () => {
    a?.close();
    b?.close();
    inspector?.disconnect();
    await redis?.stop();
  });

  it('an event published in one reaches the listeners of the other once, and its own once; other heads hear nothing', async () => {
    const there = listen(b, 'h1');
    const here = listen(a, 'h1');
    const other = listen(b, 'h2');
    // Subscribed at Redis: its channel is there.
    await until(async () => (await listeners('h1')) === 2, 'the channel subscribed by both');
    a.pubsub.publish('headChanged', 'h1', { id: 'h1', deleted: false });
    await until(() => there.events.length === 1 && here.events.length === 1, 'delivered on both');
    // Published once at Redis, and a's own listener did not hear it again from there.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(there.events).toEqual([{ id: 'h1', deleted: false }]);
    expect(here.events).toEqual([{ id: 'h1', deleted: false }]);
    expect(other.events).toEqual([]);
    await Promise.all([there.stop(), here.stop(), other.stop()]);
    // The last listener gone, so is the channel.
    await until(async () => (await listeners('h1')) === 0, 'the channel unsubscribed');
  });

  it('a subscription made while Redis is down holds once it is back; a publish meanwhile still reaches its own process', async () => {
    await redis.stop();
    await until(() => b.clients.every((client) => client.status !== 'ready'), 'b sees Redis gone');
    const there = listen(b, 'h3');
    const here = listen(a, 'h3');
    a.pubsub.publish('headChanged', 'h3', { id: 'h3', deleted: true });
    await until(() => here.events.length === 1 && a.failures.length > 0, 'delivered at home, not taken by Redis');
    expect(there.events).toEqual([]);
    await redis.start();
    await Promise.all([ready(a), ready(b)]);
    await until(async () => (await listeners('h3')) === 2, 'subscribed again once back');
    a.pubsub.publish('headChanged', 'h3', { id: 'h3', deleted: false });
    await until(() => there.events.length === 1, 'the later event reaches the other process');
    expect(there.events).toEqual([{ id: 'h3', deleted: false }]);
    await Promise.all([there.stop(), here.stop()]);
  });
});

describeWithRedis('events across processes over a Cluster (sharded pub/sub)', () => {
  let cluster: RedisClusterProcess;
  let a: Replica;
  let b: Replica;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    [a, b] = [replica(cluster.url), replica(cluster.url)];
    await Promise.all([ready(a), ready(b)]);
  });
  afterAll(async () => {
    a?.close();
    b?.close();
    await cluster?.stop();
  });

  describe('heads on different slots', () => {
    it('each event reaches the other process through the master of its channel alone', async () => {
      const ids = ['h1', 'h2', 'h3', 'h4', 'h5', 'h6'];
      const streams = ids.map((id) => listen(b, id));
      // Each channel is a shard channel of exactly one master.
      await until(async () => {
        const counts = await Promise.all(
          cluster.nodes.map(
            async ({ port }) => (await cluster.client(port).pubsub('SHARDCHANNELS', 'gw:ev:*')) as string[],
          ),
        );
        return counts.flat().length === ids.length;
      }, 'every channel subscribed on its master');
      for (const id of ids) a.pubsub.publish('headChanged', id, { id, deleted: false });
      await until(() => streams.every((stream) => stream.events.length === 1), 'every event delivered');
      expect(streams.map((stream) => stream.events[0]!.id)).toEqual(ids);
      expect(a.failures).toEqual([]);
      await Promise.all(streams.map((stream) => stream.stop()));
    });
  });
});
