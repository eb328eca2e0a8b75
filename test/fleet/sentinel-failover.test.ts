import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RedisSentinelProcess, startRedisSentinel } from '../support/redis-sentinel.js';
import { describeWithFleet } from '../support/services.js';
import { subscribeSse } from '../support/sse.js';
import { until } from '../support/until.js';
import { recordFigures } from './figures.js';
import { type Fleet, type FleetGateway, metricTotal, startFleet } from './fleet.js';
import { describeTally, LOAD_CONNECTIONS, startLoad, type Tally } from './load.js';
import { demoToken, readsAndWrites, updateHead } from './operations.js';
import { persisted, post, writesReach } from './shared-state.js';

/*
 * Scenario c: the gateways share Redis through Sentinel (REDIS_URL=redis-sentinel://…), and the
 * master is killed (SIGKILL) under read load through HAProxy. No read fails (the stores answer
 * from process memory while there is no master); once the Sentinels have promoted the replica,
 * every gateway writes its shared state there again, with no restart, and its events reach the
 * subscribers of the others.
 */

const seconds = (ms: number) => Math.round(ms / 100) / 10;

describeWithFleet('a Sentinel failover under read load', () => {
  let sentinel: RedisSentinelProcess;
  let fleet: Fleet;
  beforeAll(async () => {
    sentinel = await startRedisSentinel();
    fleet = await startFleet({
      REDIS_URL: sentinel.url,
      RATE_LIMIT_REQUESTS_PER_SECOND: '100000',
      RESPONSE_CACHE_TTL_MS: '60000',
    });
  });
  afterAll(async () => {
    await fleet?.close();
    await sentinel?.stop();
  });

  it('fails no read, and the shared state is on the promoted replica within seconds for every gateway', async () => {
    let probes = 0;
    const reaches = (gateway: FleetGateway, port: number) => writesReach(gateway, [sentinel.client(port)], probes++);
    // Shared before: each gateway found the master through the Sentinels.
    for (const gateway of fleet.gateways)
      await until(
        () => reaches(gateway, sentinel.masterPort),
        `${gateway.name} writing to the first master`,
        20_000,
        100,
      );
    const fallbacksBefore = await Promise.all(
      fleet.gateways.map((gateway) => metricTotal(gateway, 'gateway_shared_state_fallbacks_total')),
    );

    const ids = fleet.reference.store.headIds().slice(0, 8);
    const load = startLoad({
      url: fleet.url,
      connections: LOAD_CONNECTIONS,
      next: readsAndWrites(ids, await demoToken(fleet.url)),
    });
    const sharedAgainAfterMs = new Map<string, number>();
    let failoverMs = 0;
    let tally: Tally;
    try {
      await load.progress(300);
      const killedAt = performance.now();
      await sentinel.killMaster();
      const failover = sentinel.waitForFailover().then((port) => {
        failoverMs = performance.now() - killedAt;
        return port;
      });
      // From the kill on, each gateway writes as a new caller every 100 ms; the first of its
      // counters seen on the replica (which no longer replicates anything) was written after its promotion.
      await Promise.all(
        fleet.gateways.map((gateway) =>
          until(
            async () => {
              if (!(await reaches(gateway, sentinel.replicaPort))) return false;
              sharedAgainAfterMs.set(gateway.name, performance.now() - killedAt);
              return true;
            },
            `${gateway.name} writing to the promoted replica`,
            30_000,
            100,
          ),
        ),
      );
      expect(await failover).toBe(sentinel.replicaPort);
      await load.progress(300);
    } finally {
      tally = await load.stop();
    }

    // Shared again, not only written: a registration at one gateway runs by hash at the others.
    const query = '{ failover: heads(first: 1) { totalCount } }';
    const caller = { authorization: 'Bearer apq-after-failover' };
    expect((await post(fleet.gateways[0]!.endpoint, persisted(query, true), caller)).body.errors).toBeUndefined();
    for (const gateway of fleet.gateways.slice(1))
      expect((await post(gateway.endpoint, persisted(query, false), caller)).body, gateway.name).toMatchObject({
        data: { failover: { totalCount: expect.any(Number) } },
      });

    // Events too: a write through one gateway reaches a subscriber at another, through the promoted master.
    const id = fleet.reference.store.headIds()[9]!;
    const subscriber = subscribeSse({
      url: fleet.gateways[2]!.endpoint,
      query: 'subscription($id: ID!) { headChanged(id: $id) { head { name } } }',
      variables: { id },
    });
    try {
      let n = 0;
      await until(
        async () => {
          await post(fleet.gateways[0]!.endpoint, {
            query: updateHead,
            variables: { i: { id, name: `after the failover ${n++}` } },
          });
          return subscriber.events.some((event) => event.event === 'next');
        },
        'a write at gateway-1 told to a subscriber at gateway-3',
        20_000,
        200,
      );
    } finally {
      subscriber.close();
    }

    const fallbacks = await Promise.all(
      fleet.gateways.map(
        async (gateway, i) =>
          (await metricTotal(gateway, 'gateway_shared_state_fallbacks_total')) - fallbacksBefore[i]!,
      ),
    );
    recordFigures('sentinel failover', {
      reads: tally.sent,
      'failed reads': tally.failed,
      failures: tally.failures,
      'slowest read (ms)': Math.round(tally.slowestMs),
      summary: describeTally(tally),
      'seconds from the kill to the Sentinels naming the new master': seconds(failoverMs),
      'seconds from the kill to shared writes on the new master, per gateway': Object.fromEntries(
        [...sharedAgainAfterMs].map(([name, ms]) => [name, seconds(ms)]),
      ),
      'commands served from process memory meanwhile, per gateway': fallbacks,
    });
    expect(tally.failed, `${describeTally(tally)}\n${tally.samples.join('\n')}`).toBe(0);
    expect(tally.byKind.read!.sent).toBe(tally.sent);
  });
});
