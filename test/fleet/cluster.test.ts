import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationName } from '../../src/domain/operations.js';
import { type RedisClusterProcess, startRedisCluster } from '../support/redis-cluster.js';
import { describeWithFleet } from '../support/services.js';
import { until } from '../support/until.js';
import { recordFigures } from './figures.js';
import { type Fleet, type FleetGateway, metricTotal, startFleet } from './fleet.js';
import { describeTally, LOAD_CONNECTIONS, startLoad } from './load.js';
import { demoToken, headName, updateHead } from './operations.js';
import { clientAddress, persisted, post, writesReach } from './shared-state.js';

/*
 * Scenario d: the gateways share a Redis Cluster of three masters (REDIS_URL=redis-cluster://…).
 * A caller's rate limit, APQ registrations and cached answers are shared across the processes;
 * after a mixed load the keys sit on every master, no script or command was refused for
 * crossing slots (CROSSSLOT), and no store ever fell back to process memory.
 */

// A burst of 50 per caller (5 a second over a 10 s window): small enough to reach on purpose,
// large enough that the other tests' callers never do.
const RATE = 5;
const WINDOW_SECONDS = 10;
const BURST = RATE * WINDOW_SECONDS;
const headReads: readonly OperationName[] = ['getHeadExt', 'getHeadById', 'getHeadExtById'];
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describeWithFleet('three gateways sharing a Redis Cluster', () => {
  let cluster: RedisClusterProcess;
  let fleet: Fleet;
  let gateways: readonly FleetGateway[];
  /** Each gateway's fallbacks to process memory once it wrote to the Cluster: what the scenario adds is judged. */
  let fallbacksAtStart: number[];
  const fallbacks = () =>
    Promise.all(gateways.map((gateway) => metricTotal(gateway, 'gateway_shared_state_fallbacks_total')));
  beforeAll(async () => {
    cluster = await startRedisCluster();
    fleet = await startFleet({
      REDIS_URL: cluster.url,
      RATE_LIMIT_REQUESTS_PER_SECOND: String(RATE),
      RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
      RESPONSE_CACHE_TTL_MS: '60000',
    });
    gateways = fleet.gateways;
    // Connected: each gateway's writes reach the Cluster (a process just started may still be finding its nodes).
    const masters = cluster.nodes.map((node) => cluster.client(node.port));
    let probes = 0;
    for (const gateway of gateways)
      await until(() => writesReach(gateway, masters, probes++), `${gateway.name} writing to the Cluster`, 20_000, 100);
    fallbacksAtStart = await fallbacks();
  });
  afterAll(async () => {
    await fleet?.close();
    await cluster?.stop();
  });

  const headCalls = () =>
    headReads.reduce((sum, operation) => sum + (fleet.reference.countsByOperation()[operation] ?? 0), 0);
  const hits = (gateway: FleetGateway) => metricTotal(gateway, 'gateway_response_cache_lookups_total{result="hit"}');

  describe('share across processes', () => {
    it("a caller's rate limit: its burst used up at one gateway, the next operation is refused at another", async () => {
      const caller = { 'x-forwarded-for': clientAddress(0x1000) };
      const first = await Promise.all(
        Array.from({ length: BURST }, () => post(gateways[0]!.endpoint, { query: '{ __typename }' }, caller)),
      );
      expect(first.filter((answer) => answer.status === 200)).toHaveLength(BURST);
      const refused = await post(gateways[1]!.endpoint, { query: '{ __typename }' }, caller);
      expect(refused.status).toBe(429);
      expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: 'RATE_LIMITED', limit: 'requests' });
      // Another caller has a window of its own.
      expect(
        (await post(gateways[2]!.endpoint, { query: '{ __typename }' }, { 'x-forwarded-for': clientAddress(0x1001) }))
          .status,
      ).toBe(200);
    });

    it('an APQ registration: unknown at one gateway, registered at another, run by its hash at a third', async () => {
      const query = '{ cluster: heads(first: 2) { totalCount } }';
      const caller = bearer('cluster-apq-caller');
      expect(
        (await post(gateways[2]!.endpoint, persisted(query, false), caller)).body.errors?.[0]?.extensions?.code,
      ).toBe('PERSISTED_QUERY_NOT_FOUND');
      expect((await post(gateways[0]!.endpoint, persisted(query, true), caller)).body.errors).toBeUndefined();
      for (const gateway of [gateways[1]!, gateways[2]!])
        expect((await post(gateway.endpoint, persisted(query, false), caller)).body, gateway.name).toMatchObject({
          data: { cluster: { totalCount: expect.any(Number) } },
        });
    });

    it('a cached answer: kept through one gateway, a hit at the two others with no upstream call', async () => {
      const token = await demoToken(gateways[0]!.endpoint);
      const read = { query: headName, variables: { id: fleet.reference.store.headIds()[3]! } };
      const hitsBefore = await Promise.all(gateways.map(hits));
      const first = await post(gateways[0]!.endpoint, read, bearer(token));
      expect(first.body.data.head.name).toEqual(expect.any(String));
      // The answer is written after it is sent: kept once the same gateway answers it as a hit.
      const hitAtFirst = async () => {
        await post(gateways[0]!.endpoint, read, bearer(token));
        return (await hits(gateways[0]!)) > hitsBefore[0]!;
      };
      await until(hitAtFirst, 'the answer kept in the Cluster', 10_000, 50);
      const calls = headCalls();
      for (const [i, gateway] of gateways.entries()) {
        if (i === 0) continue;
        expect((await post(gateway.endpoint, read, bearer(token))).body, gateway.name).toEqual(first.body);
        expect(await hits(gateway), gateway.name).toBe(hitsBefore[i]! + 1);
      }
      expect(headCalls()).toBe(calls);
    });
  });

  it('after a mixed load (and the tests above), holds keys on every master, with no CROSSSLOT refusal and no fallback to process memory', async () => {
    const ids = fleet.reference.store.headIds().slice(0, 30);
    const writer = await demoToken(fleet.url);
    // 50 callers (each its address and a made-up token) reading 30 heads (limiter counters and
    // cached answers under many keys), APQ registrations of 60 distinct queries, and renames that
    // evict cached answers (by a caller of its own).
    const caller = (n: number) => ({
      ...bearer(`mixed-${n % 50}`),
      'x-forwarded-for': clientAddress(0x2000 + (n % 50)),
    });
    const load = startLoad({
      url: fleet.url,
      connections: LOAD_CONNECTIONS,
      total: 600,
      next: (n) => {
        const id = ids[n % ids.length]!;
        if (n % 20 === 19)
          return {
            kind: 'write',
            body: { query: updateHead, variables: { i: { id, name: `cluster ${n}` } } },
            headers: { ...bearer(writer), 'x-forwarded-for': clientAddress(0x3000) },
          };
        if (n % 10 === 4)
          return {
            kind: 'apq',
            body: persisted(`{ q${n}: heads(first: 1) { totalCount } }`, true),
            headers: caller(n),
          };
        return { kind: 'read', body: { query: headName, variables: { id } }, headers: caller(n) };
      },
    });
    const tally = await load.done;
    const keys = await cluster.keysPerMaster();
    const errors = await cluster.errorStats();
    const fellBack = (await fallbacks()).map((count, i) => count - fallbacksAtStart[i]!);
    recordFigures('redis cluster', {
      operations: tally.sent,
      failed: tally.failed,
      summary: describeTally(tally),
      'keys per master (port: DBSIZE)': Object.fromEntries(keys),
      'slots per master': Object.fromEntries(
        cluster.nodes.map((node) => [node.port, node.slots.map(([first, last]) => `${first}-${last}`).join(',')]),
      ),
      'errorstats per master': Object.fromEntries(errors),
      'fallbacks to process memory, per gateway': fellBack,
      'fallbacks before the first write reached the Cluster, per gateway': fallbacksAtStart,
      'cache hits, per gateway': await Promise.all(gateways.map(hits)),
    });
    expect(tally.failed, `${describeTally(tally)}\n${tally.samples.join('\n')}`).toBe(0);
    for (const [port, count] of keys) expect(count, `keys on the master at ${port}`).toBeGreaterThan(0);
    for (const [port, stats] of errors) expect(stats.CROSSSLOT ?? 0, `CROSSSLOT refusals at ${port}`).toBe(0);
    expect(fellBack, gateways.map((gateway) => `${gateway.name}: ${gateway.process?.stdout()}`).join('\n')).toEqual([
      0, 0, 0,
    ]);
  });
});
