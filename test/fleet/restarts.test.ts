import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RedisProcess, startRedis } from '../support/redis.js';
import { describeWithFleet } from '../support/services.js';
import { subscribeSse } from '../support/sse.js';
import { until } from '../support/until.js';
import { recordFigures } from './figures.js';
import { type Fleet, startFleet } from './fleet.js';
import { updateHead } from './operations.js';
import { clientAddress, post, writesReach } from './shared-state.js';

/*
 * Scenario g: what the fleet remembers through restarts, on one Redis node. Every gateway
 * restarted in turn while two users signed in through the gateway's login sit behind one office
 * address: each restarted gateway knows their tokens at once (kept in Redis), so one's burst
 * leaves the other and the address served. Then Redis itself restarted, empty, with a change made
 * while it was down: a client resuming with Last-Event-ID is sent the head as it is now.
 */

const SHUTDOWN_DELAY_MS = 1_000;
const WINDOW = 10;
const LOGIN = 'mutation($i: LoginInput!) { login(input: $i) { accessToken } }';
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { head { name } } }';

describeWithFleet('restarts: the gateways in turn, then Redis (one node)', () => {
  let redis: RedisProcess;
  let fleet: Fleet;
  beforeAll(async () => {
    redis = await startRedis();
    // A window of ten a caller (RATE_LIMIT_WINDOW_SECONDS=10, one a second): one burst fills it, whatever the clock.
    fleet = await startFleet({
      REDIS_URL: redis.url,
      SHUTDOWN_DELAY_MS: String(SHUTDOWN_DELAY_MS),
      RATE_LIMIT_REQUESTS_PER_SECOND: '1',
      RATE_LIMIT_WINDOW_SECONDS: String(WINDOW),
    });
  });
  afterAll(async () => {
    await fleet?.close();
    await redis?.stop();
  });

  it('two signed-in users behind one address keep their own windows at every gateway just restarted', async () => {
    const office = clientAddress(0xf1ce);
    const token = async (username: string, n: number) => {
      const answer = await post(
        fleet.url,
        { query: LOGIN, variables: { i: { username, password: `${username}-password` } } },
        { 'x-forwarded-for': clientAddress(0x100 + n) },
      );
      expect(answer.body.errors, JSON.stringify(answer.body)).toBeUndefined();
      return `Bearer ${(answer.body.data as { login: { accessToken: string } }).login.accessToken}`;
    };
    const [demo, alice] = [await token('demo', 1), await token('alice', 2)];
    const rounds: { gateway: string; demo: number[]; alice: number; address: number }[] = [];
    for (const gateway of fleet.gateways) {
      await fleet.restart(gateway);
      // Straight at the gateway just back (as HAProxy would send them), before either user makes a call that checks a
      // token.
      const from = (authorization?: string) =>
        post(
          gateway.endpoint,
          { query: '{ __typename }' },
          { 'x-forwarded-for': office, ...(authorization === undefined ? {} : { authorization }) },
        );
      const burst = await Promise.all(Array.from({ length: WINDOW }, () => from(demo)));
      rounds.push({
        gateway: gateway.name,
        demo: burst.map((answer) => answer.status),
        alice: (await from(alice)).status,
        address: (await from()).status,
      });
    }
    recordFigures('signed-in users behind one address through a rolling restart', { rounds });
    for (const round of rounds) {
      // Demo's window is the fleet's (Redis): its first burst has all ten, the later ones what the window has left.
      expect(round.alice, JSON.stringify(round)).toBe(200);
      expect(round.address, JSON.stringify(round)).toBe(200);
    }
    expect(rounds[0]!.demo).toEqual(Array(WINDOW).fill(200));
  });

  it('Redis restarted empty, a change made while it was down: a client resuming is sent the head as it is now', async () => {
    const id = fleet.reference.store.headIds()[5]!;
    const [first, second] = fleet.gateways;
    const client = subscribeSse({ url: first!.endpoint, query: WATCH, variables: { id } });
    const names = () =>
      client.events
        .filter((event) => event.event === 'next')
        .map(
          (event) =>
            (JSON.parse(event.data) as { data: { headChanged: { head: { name: string } } } }).data.headChanged.head
              .name,
        );
    await until(
      async () => {
        await post(first!.endpoint, { query: updateHead, variables: { i: { id, name: 'Seen before the outage' } } });
        return names().includes('Seen before the outage');
      },
      'the client subscribed and sent a change',
      20_000,
      200,
    );
    const lastEventId = client.lastEventId!;
    client.close();
    await redis.stop();
    // Through the second gateway while Redis is down: told to its own subscribers only, logged nowhere.
    const answer = await post(second!.endpoint, {
      query: updateHead,
      variables: { i: { id, name: 'Written while Redis was down' } },
    });
    expect(answer.body.errors, JSON.stringify(answer.body)).toBeUndefined();
    await redis.start();
    const back = performance.now();
    // Resumed at the third gateway once it writes to Redis again (a gateway without Redis sends the head as it is now
    // anyway).
    const node = new Redis(redis.url);
    let probes = 0;
    try {
      await until(
        () => writesReach(fleet.gateways[2]!, [node], probes++),
        'the third gateway back on Redis',
        20_000,
        100,
      );
    } finally {
      node.disconnect();
    }
    const resumed = subscribeSse({ url: fleet.gateways[2]!.endpoint, query: WATCH, variables: { id }, lastEventId });
    const resumedNames = () =>
      resumed.events
        .filter((event) => event.event === 'next')
        .map(
          (event) =>
            (JSON.parse(event.data) as { data: { headChanged: { head: { name: string } } } }).data.headChanged.head
              .name,
        );
    await until(() => resumedNames().length > 0, 'what it missed', 20_000, 20);
    recordFigures('a resume after Redis restarted empty', {
      'ms from Redis back to the resumed client’s event': Math.round(performance.now() - back),
    });
    expect(resumedNames()[0]).toBe('Written while Redis was down');
    resumed.close();
  });
});
