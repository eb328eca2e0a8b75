import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RedisClusterProcess, startRedisCluster } from '../support/redis-cluster.js';
import { describeWithFleet } from '../support/services.js';
import { type SseSubscription, subscribeSse } from '../support/sse.js';
import { until } from '../support/until.js';
import { recordFigures } from './figures.js';
import { type Fleet, startFleet } from './fleet.js';
import { updateHead } from './operations.js';
import { post, writesReach } from './shared-state.js';

/*
 * Scenario f: subscriptions across a fleet on a Redis Cluster. A write through one gateway reaches
 * the subscribers of every gateway (sharded pub/sub); then every gateway is restarted in turn
 * under a stream of writes, with SSE clients connected through HAProxy that reconnect with
 * Last-Event-ID as each stream is completed by its stopping gateway: each ends having seen the last
 * write, none having missed one it could resume.
 */

const SHUTDOWN_DELAY_MS = 1_500;
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { head { name } } }';
const CLIENTS = 6;

const names = (subscription: SseSubscription) =>
  subscription.events
    .filter((event) => event.event === 'next')
    .map(
      (event) =>
        (JSON.parse(event.data) as { data?: { headChanged: { head: { name: string } } } }).data?.headChanged.head.name,
    );

describeWithFleet('subscriptions across three gateways on a Redis Cluster', () => {
  let cluster: RedisClusterProcess;
  let fleet: Fleet;
  const open: SseSubscription[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster();
    // A limit that refuses nothing: its counters are how a gateway is seen writing to the Cluster.
    fleet = await startFleet({
      REDIS_URL: cluster.url,
      SHUTDOWN_DELAY_MS: String(SHUTDOWN_DELAY_MS),
      RATE_LIMIT_REQUESTS_PER_SECOND: '100000',
    });
    const masters = cluster.nodes.map((node) => cluster.client(node.port));
    let probes = 0;
    for (const gateway of fleet.gateways)
      await until(() => writesReach(gateway, masters, probes++), `${gateway.name} writing to the Cluster`, 20_000, 100);
  });
  afterAll(async () => {
    for (const subscription of open) subscription.close();
    await fleet?.close();
    await cluster?.stop();
  });

  it('a write through one gateway reaches the subscribers of every gateway', async () => {
    const id = fleet.reference.store.headIds()[0]!;
    const subscribers = fleet.gateways.map((gateway) =>
      subscribeSse({ url: gateway.endpoint, query: WATCH, variables: { id } }),
    );
    open.push(...subscribers);
    // Subscribed: a first write reaches each, however long each took to subscribe its channel.
    let n = 0;
    await until(
      async () => {
        await post(fleet.gateways[0]!.endpoint, {
          query: updateHead,
          variables: { i: { id, name: `warm-up ${n++}` } },
        });
        return subscribers.every((subscriber) => names(subscriber).length > 0);
      },
      'every gateway subscribed',
      20_000,
      200,
    );
    const writtenAt = performance.now();
    await post(fleet.gateways[1]!.endpoint, { query: updateHead, variables: { i: { id, name: 'Through gateway-2' } } });
    await until(
      () => subscribers.every((subscriber) => names(subscriber).at(-1) === 'Through gateway-2'),
      'the write at every gateway',
      10_000,
      5,
    );
    recordFigures('subscriptions on a Cluster', {
      'ms from the write to its event at every gateway': Math.round(performance.now() - writtenAt),
    });
    for (const subscriber of subscribers) subscriber.close();
  });

  it('a rolling restart: clients moved by each stop resume with Last-Event-ID, and end having seen the last write', async () => {
    const id = fleet.reference.store.headIds()[1]!;
    const clients = Array.from({ length: CLIENTS }, () =>
      subscribeSse({ url: fleet.url, query: WATCH, variables: { id }, resume: true }),
    );
    open.push(...clients);
    await new Promise((resolve) => setTimeout(resolve, 500));
    let version = 0;
    let writing = true;
    const writer = (async () => {
      while (writing) {
        const answer = await post(fleet.url, { query: updateHead, variables: { i: { id, name: `v${++version}` } } });
        expect(answer.body.errors, JSON.stringify(answer.body)).toBeUndefined();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const exitCodes: (number | null)[] = [];
    try {
      for (const gateway of fleet.gateways) exitCodes.push((await fleet.restart(gateway)).exitCode);
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      writing = false;
      await writer;
    }
    const last = `v${version}`;
    await until(() => clients.every((client) => names(client).at(-1) === last), `every client at ${last}`, 20_000, 50);
    const completed = clients.map((client) => client.events.filter((event) => event.event === 'complete').length);
    recordFigures('subscriptions through a rolling restart', {
      writes: version,
      clients: CLIENTS,
      'connections per client (1 + reconnections)': clients.map((client) => client.connections),
      'streams completed by a stopping gateway, per client': completed,
      'events per client': clients.map((client) => names(client).length),
    });
    expect(exitCodes).toEqual([0, 0, 0]);
    // Every client was moved at least once (a stop completed its stream) and resumed.
    for (const client of clients) expect(client.connections).toBeGreaterThan(1);
    for (const client of clients) client.close();
  });
});
