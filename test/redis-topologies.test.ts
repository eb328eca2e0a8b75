import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import slotOf from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createMemoryQueryStore, createRedisQueryStore } from '../src/server/documents/apq-store.js';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import type { GuardedStore } from '../src/server/response-cache/cache.js';
import { CLOCK_SKEW_MS } from '../src/server/response-cache/redis-answers.js';
import { createRedisResponseCache, type RedisEpoch } from '../src/server/response-cache/redis-store.js';
import type { SharedRedis } from '../src/server/shared-state/shared-redis.js';
import { createCallerLimiters, take, waitOf } from '../src/server/traffic/limiters.js';
import { sampleOf } from './support/metrics.js';
import { connectRedis } from './support/redis.js';
import { type RedisClusterProcess, startRedisCluster } from './support/redis-cluster.js';
import { type RedisSentinelProcess, startRedisSentinel } from './support/redis-sentinel.js';
import { describeWithRedis } from './support/services.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { until } from './support/until.js';

/*
 * The shared stores (response cache, APQ, rate limits) on the two REDIS_URL topologies beside one
 * node, against real redis-server processes: a Cluster of three masters and a master watched by
 * three Sentinels. Two connections stand for two replicas. (Gateways behind HAProxy on both:
 * the fleet suite, test/fleet/.)
 */

type Store = GuardedStore<RedisEpoch>;

const cacheOptions = {
  maxTtlMs: 60_000,
  maxEntryBytes: 4_096,
  raceWindowMs: 30_000,
  budget: { maxBytes: 64 * 1024 * 1024, callerBytes: 64 * 1024 * 1024 },
};
const answer = (name: string) => ({ data: { head: { id: name, name } } });
const head = (id: string) => ({ typename: 'Head', id });
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const limits = {
  requestsPerSecond: 3,
  upstreamCallsPerSecond: undefined,
  inFlight: undefined,
  addressRequestsPerSecond: undefined,
  windowSeconds: 2,
  trustProxy: false,
};

async function fill(store: Store, key: string, result: object, entities: { typename: string; id?: string }[]) {
  const { answer: found, epoch } = await store.lookup(key);
  expect(found).toBeUndefined();
  return store.write(key, result, entities, 30_000, epoch!);
}

const get = async (store: Store, key: string) => (await store.lookup(key)).answer?.result;

describeWithRedis('REDIS_URL=redis-cluster://…: the shared stores on a Cluster of three masters', () => {
  let cluster: RedisClusterProcess;
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const replicas: SharedRedis[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster();
    // Each replica names one node: the Cluster tells it of the others.
    for (const node of cluster.nodes)
      replicas.push(await connectRedis(`redis-cluster://127.0.0.1:${node.port}`, metrics));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.close()));
    await cluster?.stop();
  });

  const masterOf = (key: string) =>
    cluster.nodes.find(({ slots }) => slots.some(([first, last]) => slotOf(key) >= first && slotOf(key) <= last))!.port;

  it('shares the response cache: kept by one replica, a hit at another, evicted through a third; spread over every master; never CROSSSLOT', async () => {
    const [a, b, c] = replicas.map((redis) => createRedisResponseCache({ redis, ...cacheOptions })) as [
      Store,
      Store,
      Store,
    ];
    // 90 answers, each holding two heads of ten and a listing: its keys in many slots.
    for (let i = 0; i < 90; i++)
      expect(
        await fill([a, b, c][i % 3]!, `q${i}`, answer(`${i}`), [
          head(`h${i % 10}`),
          head(`h${(i + 1) % 10}`),
          { typename: 'HeadConnection' },
        ]),
      ).toBe(true);
    for (const store of [a, b, c]) expect(await get(store, 'q7')).toEqual(answer('7'));

    // Head h3 is held by the answers i % 10 == 3 and i % 10 == 2: 18 of them, wherever they are.
    expect(await c.invalidate([head('h3')])).toBe(18);
    for (let i = 0; i < 90; i++)
      expect({ i, kept: (await get(a, `q${i}`)) !== undefined }).toEqual({ i, kept: i % 10 !== 3 && i % 10 !== 2 });
    // A whole type: the rest of them.
    expect(await b.invalidate([{ typename: 'HeadConnection' }])).toBe(72);

    for (let i = 0; i < 90; i++) await fill(a, `again${i}`, answer(`${i}`), [head(`again${i}`)]);
    // Each answer on its own key, each entity's index on its own: every master holds some.
    for (const [port, keys] of await cluster.keysPerMaster())
      expect({ port, some: keys > 10 }).toEqual({ port, some: true });
    for (const [port, errors] of await cluster.errorStats())
      expect({ port, crossSlot: errors.CROSSSLOT ?? 0 }).toEqual({ port, crossSlot: 0 });
    expect(
      sampleOf(
        await metrics.registry.metrics(),
        'gateway_shared_state_fallbacks_total{store="response_cache",reason="error"}',
      ),
    ).toBeUndefined();
  });

  it('refuses to keep an answer whose entity another replica invalidated after its lookup, though its keys are in several slots', async () => {
    const [a, b] = replicas.map((redis) => createRedisResponseCache({ redis, ...cacheOptions })) as [Store, Store];
    const slow = await a.lookup('slow');
    expect(await b.invalidate([head('raced')])).toBe(0);
    expect(
      await a.write(
        'slow',
        answer('stale'),
        [head('raced'), head('other'), { typename: 'Hair', id: '1' }],
        30_000,
        slow.epoch!,
      ),
    ).toBe(false);
    // Not even as the empty placeholder a write across slots leaves while its entities are checked.
    expect(await replicas[2]!.client.exists('gw:rc:a:slow')).toBe(0);
    expect(await get(b, 'slow')).toBeUndefined();
  });

  it('lets a write held between its checks and its last step land neither over the eviction that came meanwhile nor over a fresher write', async () => {
    let reached!: () => void;
    let release!: () => void;
    const atLastStep = new Promise<void>((resolve) => (reached = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    const held = createRedisResponseCache({
      redis: replicas[0]!,
      ...cacheOptions,
      holdBeforeLastStep: () => {
        reached();
        return released;
      },
    });
    const [b, c] = replicas.slice(1).map((redis) => createRedisResponseCache({ redis, ...cacheOptions })) as [
      Store,
      Store,
    ];

    // A read that began before a write: its entities checked and indexed, then held.
    const { epoch } = await held.lookup('held-write');
    const slow = held.write('held-write', answer('stale'), [head('held'), head('other-held')], 30_000, epoch!);
    await atLastStep;
    // The write's eviction takes the held write's placeholder; a read after it (past the clocks'
    // allowed skew) keeps its fresh answer under the same key.
    expect(await b.invalidate([head('held')])).toBe(1);
    await sleep(CLOCK_SKEW_MS + 100);
    expect(await fill(c, 'held-write', answer('fresh'), [head('held')])).toBe(true);

    release();
    expect(await slow).toBe(false);
    expect(await get(b, 'held-write')).toEqual(answer('fresh'));
  });

  it('shares APQ registrations in 16 shards, each one script in one slot, spread over every master', async () => {
    const apq = replicas.map((redis) =>
      createRedisQueryStore({
        redis,
        local: createMemoryQueryStore({ maxEntries: 1_000, maxBytes: 5_000_000 }),
        ttlSeconds: 600,
        maxEntries: 1_000,
        maxBytes: 5_000_000,
      }),
    );
    const queries = Array.from({ length: 64 }, (_, i) => `{ __typename } # registration ${i}`);
    for (const [i, query] of queries.entries()) await apq[i % 3]!.set(sha256(query), query);
    // A replica that has none in its own memory finds each one in the Cluster.
    const fresh = createRedisQueryStore({
      redis: replicas[0]!,
      local: createMemoryQueryStore({ maxEntries: 1_000, maxBytes: 5_000_000 }),
      ttlSeconds: 600,
      maxEntries: 1_000,
      maxBytes: 5_000_000,
    });
    for (const query of queries) expect(await fresh.get(sha256(query))).toBe(query);
    const shardMasters = new Set(Array.from({ length: 16 }, (_, shard) => masterOf(`gw:apq:{apq-${shard}}:texts`)));
    expect(shardMasters).toEqual(new Set(cluster.nodes.map(({ port }) => port)));
    for (const [port, errors] of await cluster.errorStats())
      expect({ port, crossSlot: errors.CROSSSLOT ?? 0 }).toEqual({ port, crossSlot: 0 });
  });

  it("counts a caller's rate limit once across replicas: each caller's counter is one key, in its own slot", async () => {
    const [a, b] = replicas.map((redis) => createCallerLimiters(limits, { redis, inFlightTtlSeconds: 30 }).requests!);
    const refused = async (limiter: typeof a, caller: string) =>
      waitOf(limiter!, await take(limiter!, caller, 1)) !== undefined;
    // 3 a second over a window of 2 s: 6, whichever replica counts them.
    for (let i = 0; i < 6; i++) expect(await refused(i % 2 ? a : b, 'token:cluster-caller')).toBe(false);
    expect(await refused(a, 'token:cluster-caller')).toBe(true);
    expect(await refused(b, 'token:someone-else')).toBe(false);
    expect(await replicas[1]!.client.exists('gw:requests:token:cluster-caller')).toBe(1);
    expect(
      sampleOf(
        await metrics.registry.metrics(),
        'gateway_shared_state_fallbacks_total{store="limits",reason="unreachable"}',
      ),
    ).toBeUndefined();
  });
});

describeWithRedis('REDIS_URL=redis-cluster://…: a master failing over to its replica', () => {
  let cluster: RedisClusterProcess;
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  let shared: SharedRedis;

  beforeAll(async () => {
    cluster = await startRedisCluster({ replicas: true, nodeTimeoutMs: 1_000 });
    shared = await connectRedis(cluster.url, metrics);
  }, 60_000);
  afterAll(async () => {
    await shared?.close();
    await cluster?.stop();
  });

  it('is news once, when its replica serves its slots (not while the dead master comes and goes), and counts go to the promoted replica', async () => {
    const limiter = createCallerLimiters(limits, { redis: shared, inFlightTtlSeconds: 30 }).requests!;
    const victim = cluster.nodes[0]!;
    // Who serves the victim's first slot, as the client sees it, each time it says Redis is back.
    const ownersWhenBack: string[] = [];
    shared.onBack(() => ownersWhenBack.push((shared.client as Cluster).slots[victim.slots[0]![0]]![0]!));
    const onVictim = (caller: string) =>
      victim.slots.some(
        ([first, last]) => slotOf(`gw:requests:${caller}`) >= first && slotOf(`gw:requests:${caller}`) <= last,
      );

    await cluster.killMaster(victim.port);
    let promoted: number | undefined;
    let settled = false;
    const promotion = cluster
      .waitForPromotion(victim.slots[0]![0], victim.port)
      .then((port) => (promoted = port))
      .finally(() => (settled = true));
    // Callers counted meanwhile, whichever slot they fall in: served (in process memory where Redis cannot).
    for (let n = 0; !settled; n++) {
      expect(waitOf(limiter, await take(limiter, `token:during-${n}`, 1))).toBeUndefined();
      await sleep(20);
    }
    await promotion;

    // Counted on the promoted replica once the client has seen the Cluster's new slots.
    const callers = Array.from({ length: 200 }, (_, n) => `token:after-${n}`).filter(onVictim);
    let next = 0;
    await until(
      async () => {
        const caller = callers[next++ % callers.length]!;
        await take(limiter, caller, 1);
        return (await cluster.client(promoted!).exists(`gw:requests:${caller}`)) === 1;
      },
      'a count on the promoted replica',
      20_000,
    );
    // Once, and with the promoted replica serving the slots.
    expect(ownersWhenBack).toEqual([`127.0.0.1:${promoted}`]);
  }, 60_000);
});

describeWithRedis('REDIS_URL=redis-sentinel://…: the shared stores follow a failover', () => {
  let sentinel: RedisSentinelProcess;
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const replicas: SharedRedis[] = [];

  beforeAll(async () => {
    sentinel = await startRedisSentinel();
    for (let i = 0; i < 2; i++) replicas.push(await connectRedis(sentinel.url, metrics));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.close()));
    await sentinel?.stop();
  });

  it('falls back while the master is gone, writes to the promoted replica within seconds, and makes again an eviction the failover lost', async () => {
    const [a, b] = replicas.map((redis) => createRedisResponseCache({ redis, ...cacheOptions })) as [Store, Store];
    const [limitsA] = replicas.map(
      (redis) => createCallerLimiters(limits, { redis, inFlightTtlSeconds: 30 }).requests!,
    );
    expect(await fill(a, 'held', answer('held'), [head('1')])).toBe(true);
    expect(await sentinel.client(sentinel.masterPort).call('WAIT', '1', '1000')).toBe(1);
    const firstMaster = sentinel.masterPort;

    await sentinel.killMaster();
    // A write through b meanwhile: its eviction cannot be made, and is owed.
    await until(() => !replicas[1]!.ready(), 'b has lost the master');
    await expect(b.invalidate([head('1')])).rejects.toThrow();
    // The limits count in process memory meanwhile: the caller is served.
    expect(waitOf(limitsA!, await take(limitsA!, 'token:during-failover', 1))).toBeUndefined();

    const promoted = await sentinel.waitForFailover();
    expect(promoted).not.toBe(firstMaster);
    // Once each replica has found the new master, what they write is there, and the answer the
    // failover kept (it was replicated before) has been evicted by b's owed eviction.
    await until(() => replicas.every((replica) => replica.ready()), 'both replicas on the new master', 20_000);
    await until(
      async () => (await sentinel.client(promoted).exists('gw:rc:a:held')) === 0,
      'the owed eviction made on the new master',
    );
    await until(async () => {
      waitOf(limitsA!, await take(limitsA!, 'token:after-failover', 1));
      return (await sentinel.client(promoted).exists('gw:requests:token:after-failover')) === 1;
    }, 'a limit counted on the new master');
    await until(
      async () =>
        Promise.resolve(a.lookup('x')).then(
          () => true,
          () => false,
        ),
      'a answers again',
    );
    expect(await get(a, 'held')).toBeUndefined();
    expect(
      sampleOf(
        await metrics.registry.metrics(),
        'gateway_shared_state_fallbacks_total{store="limits",reason="unreachable"}',
      ),
    ).toBeGreaterThan(0);
  }, 60_000);
});

describeWithRedis(
  'REDIS_URL=redis-sentinel://…: a failover announced while a connection asks the Sentinels for the master',
  () => {
    let sentinel: RedisSentinelProcess;
    let slowLinks: TcpProxy[];
    const replicas: SharedRedis[] = [];

    beforeAll(async () => {
      sentinel = await startRedisSentinel();
      // Each question to a Sentinel takes 400 ms or more: the news of the failover comes while one is asked.
      slowLinks = await Promise.all(
        sentinel.sentinelPorts.map((port) => startTcpProxy({ host: '127.0.0.1', port }, { delayMs: 200 })),
      );
      const url = `redis-sentinel://${slowLinks.map(({ port }) => `127.0.0.1:${port}`).join(',')}/${sentinel.masterName}`;
      const metrics = new GatewayMetrics({ defaultMetrics: false });
      for (let i = 0; i < 3; i++) replicas.push(await connectRedis(url, metrics));
    }, 60_000);
    afterAll(async () => {
      await Promise.all(replicas.map((replica) => replica.close()));
      await Promise.all(slowLinks?.map((link) => link.close()) ?? []);
      await sentinel?.stop();
    });

    it('keeps looking (ioredis gives such a connection up for good), and every connection writes to the promoted replica', async () => {
      expect(replicas.every((replica) => replica.ready())).toBe(true);
      await sentinel.killMaster();
      const promoted = await sentinel.waitForFailover();
      await until(() => replicas.every((replica) => replica.ready()), 'every connection on the new master', 20_000);
      await Promise.all(replicas.map((replica, i) => replica.client.set(`after-failover-${i}`, '1')));
      expect(await sentinel.client(promoted).exists('after-failover-0', 'after-failover-1', 'after-failover-2')).toBe(
        3,
      );
    }, 60_000);
  },
);
