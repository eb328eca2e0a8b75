import { encodeGlobalID } from '@pothos/plugin-relay';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { type SseEvent, subscribeSse } from './support/sse.js';
import { until } from './support/until.js';

/*
 * Resume (server/real-time/change-log.ts): each SSE event's `id` is the change it answers; a client
 * that reconnects with `Last-Event-ID` within SUBSCRIPTION_REPLAY_MS is sent what it missed (the
 * head as it is now, once), from any replica; one that missed nothing is sent nothing.
 */

const globalId = (id: string) => encodeGlobalID('Head', id);
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }';
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { head { name } } }';

/** A subscription over SSE by hand (an EventSource's requests), answered at `url`, its `next` events gathered. */
async function sse(url: string, id: string, lastEventId?: string) {
  const subscription = subscribeSse({
    url,
    query: WATCH,
    variables: { id },
    ...(lastEventId === undefined ? {} : { lastEventId }),
  });
  const events = subscription.events;
  return {
    get events() {
      return events.filter((event) => event.event === 'next');
    },
    close: () => subscription.close(),
  };
}

const nameIn = (event: SseEvent | undefined) =>
  (JSON.parse(event!.data) as { data: { headChanged: { head: { name: string } } } }).data.headChanged.head.name;

describe('SSE resume in one process (the defaults)', () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  beforeAll(async () => {
    t = await startTestGateway();
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());

  it('sends a reconnecting client what it missed, once, at once; and nothing to one that missed nothing', async () => {
    const id = ids[50]!;
    const first = await sse(url, id);
    await until(() => t.subscriptions.open() === 1, 'open');
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Before the cut' } });
    await until(() => first.events.length === 1, 'the first event');
    const [seen] = first.events;
    expect(seen!.id).toMatch(/^\d+-\d+$/);
    first.close();
    await until(() => t.subscriptions.open() === 0, 'the client gone');

    // Reconnecting with nothing missed: nothing sent until the next change.
    const nothingMissed = await sse(url, id, seen!.id);
    await until(() => t.subscriptions.open() === 1, 'reopened');
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'After the reconnect' } });
    await until(() => nothingMissed.events.length >= 1, 'the next change');
    expect(nothingMissed.events.map(nameIn)).toEqual(['After the reconnect']);
    nothingMissed.close();
    await until(() => t.subscriptions.open() === 0, 'gone again');

    // Two changes while away: one event, the head as it is now.
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Missed once' } });
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Missed twice' } });
    const again = await sse(url, id, nothingMissed.events[0]!.id);
    await until(() => again.events.length === 1, 'what it missed');
    expect(nameIn(again.events[0])).toBe('Missed twice');
    expect(order(again.events[0]!.id!)).toBeGreaterThan(order(seen!.id!));
    // Sent once: the next event is the next change.
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'After the catch-up' } });
    await until(() => again.events.length >= 2, 'the next change');
    expect(again.events.map(nameIn)).toEqual(['Missed twice', 'After the catch-up']);
    again.close();
  });

  it('a Last-Event-ID the log cannot vouch for (older than the replay window, not an id, never logged): the head as it is now', async () => {
    const id = ids[51]!;
    for (const lastEventId of [
      `${Date.now() - 10 * 60_000}-0`,
      String(Date.now()),
      'not-an-id',
      `${Date.now() - 1_000}-7`,
    ]) {
      const resumed = await sse(url, id, lastEventId);
      await until(() => resumed.events.length === 1, `the head as it is now, after ${lastEventId}`);
      expect(nameIn(resumed.events[0])).toBe(t.reference.store.findHead(id)!.head.name);
      resumed.close();
      await until(() => t.subscriptions.open() === 0, 'closed');
    }
  });

  it('a log flushed by changes to more heads than it keeps: the head as it is now, not nothing', async () => {
    const id = ids[53]!;
    const first = await sse(url, id);
    await until(() => t.subscriptions.open() === 1, 'open');
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Seen before the flood' } });
    await until(() => first.events.length === 1, 'the first event');
    first.close();
    await until(() => t.subscriptions.open() === 0, 'the client gone');
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Missed in the flood' } });
    // Changes to 10,100 other heads (made-up ids, as polling finds them gone): the log keeps 10,000 heads.
    for (let i = 0; i < 10_100; i++)
      t.headEvents.publish({
        id: `0b1ab1e5-0000-4000-8000-${String(i).padStart(12, '0')}`,
        deleted: true,
        polled: true,
      });
    const again = await sse(url, id, first.events[0]!.id);
    await until(() => again.events.length === 1, 'the head as it is now');
    expect(nameIn(again.events[0])).toBe('Missed in the flood');
    again.close();
  });
});

/** An event id's place in a head's order: `<ms>-<sequence>`. */
const order = (eventId: string) => {
  const [ms, sequence] = eventId.split('-').map(Number);
  return ms! * 1_000_000 + sequence!;
};

describeWithRedis('SSE resume across replicas over Redis', () => {
  let redis: RedisProcess;
  let a: TestGateway;
  let b: TestGateway;
  beforeAll(async () => {
    redis = await startRedis();
    a = await startTestGateway({ env: { REDIS_URL: redis.url } });
    b = await startTestGateway({ env: { REDIS_URL: redis.url }, reference: a.reference });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await redis?.stop();
  });

  it('a client cut from one replica reconnects to another and gets what it missed there', async () => {
    const id = a.reference.store.headIds()[52]!;
    const first = await sse(await a.listen(), id);
    await until(() => a.subscriptions.open() === 1, 'open at a');
    await a.execute(UPDATE, { input: { id: globalId(id), name: 'Seen at a' } });
    await until(() => first.events.length === 1, 'the first event');
    first.close();
    // Written through a while the client is away.
    await a.execute(UPDATE, { input: { id: globalId(id), name: 'Missed, found at b' } });
    const atB = await sse(await b.listen(), id, first.events[0]!.id);
    await until(() => atB.events.length === 1, 'what it missed, from b');
    expect(nameIn(atB.events[0])).toBe('Missed, found at b');
    atB.close();
  });

  it('a burst of changes at one replica puts no event id ahead of the other’s: a change at b after the burst is what a client resuming there missed', async () => {
    const id = a.reference.store.headIds()[54]!;
    const first = await sse(await a.listen(), id);
    await until(() => a.subscriptions.open() === 1, 'open at a');
    // 3,000 changes at a in a few milliseconds (a clock that added a millisecond a change would run 3 s ahead).
    for (let i = 0; i < 3_000; i++) a.headEvents.publish({ id });
    await a.execute(UPDATE, { input: { id: globalId(id), name: 'The end of the burst' } });
    await until(
      () => first.events.length >= 1 && nameIn(first.events.at(-1)) === 'The end of the burst',
      'the burst’s last event at the client',
    );
    const seen = first.events.at(-1)!.id!;
    first.close();
    await until(() => a.subscriptions.open() === 0, 'the client gone');
    await b.execute(UPDATE, { input: { id: globalId(id), name: 'Written at b after the burst' } });
    const atB = await sse(await b.listen(), id, seen);
    await until(() => atB.events.length === 1, 'what it missed, from b');
    expect(nameIn(atB.events[0])).toBe('Written at b after the burst');
    atB.close();
  });

  it('a change made while Redis was down, Redis back empty: a client resuming is sent the head as it is now', async () => {
    const id = a.reference.store.headIds()[55]!;
    const first = await sse(await a.listen(), id);
    await until(() => a.subscriptions.open() === 1, 'open at a');
    await a.execute(UPDATE, { input: { id: globalId(id), name: 'Seen before the outage' } });
    await until(() => first.events.length === 1, 'the first event');
    first.close();
    await until(() => a.subscriptions.open() === 0, 'the client gone');
    await redis.stop();
    await until(() => !a.redis!.ready(), 'a sees Redis gone');
    await a.execute(UPDATE, { input: { id: globalId(id), name: 'Written during the outage' } });
    await redis.start();
    await until(() => a.redis!.ready() && b.redis!.ready(), 'both see Redis back', 10_000);
    const atB = await sse(await b.listen(), id, first.events[0]!.id);
    await until(() => atB.events.length === 1, 'the head as it is now, from b');
    expect(nameIn(atB.events[0])).toBe('Written during the outage');
    atB.close();
  });
});
