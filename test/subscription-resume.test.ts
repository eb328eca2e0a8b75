import { encodeGlobalID } from '@pothos/plugin-relay';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { startRedis, type RedisProcess } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { subscribeSse, type SseEvent } from './support/sse.js';
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
  const subscription = subscribeSse({ url, query: WATCH, variables: { id }, ...(lastEventId === undefined ? {} : { lastEventId }) });
  const events = subscription.events;
  return {
    get events() {
      return events.filter((event) => event.event === 'next');
    },
    close: () => subscription.close(),
  };
}

const nameIn = (event: SseEvent | undefined) => (JSON.parse(event!.data) as { data: { headChanged: { head: { name: string } } } }).data.headChanged.head.name;

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
    expect(seen!.id).toMatch(/^\d+$/);
    first.close();
    await until(() => t.subscriptions.open() === 0, 'the client gone');

    // Reconnecting with nothing missed: nothing sent until the next change.
    const nothingMissed = await sse(url, id, seen!.id);
    await until(() => t.subscriptions.open() === 1, 'reopened');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(nothingMissed.events).toEqual([]);
    nothingMissed.close();
    await until(() => t.subscriptions.open() === 0, 'gone again');

    // Two changes while away: one event, the head as it is now.
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Missed once' } });
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Missed twice' } });
    const again = await sse(url, id, seen!.id);
    await until(() => again.events.length === 1, 'what it missed');
    expect(nameIn(again.events[0])).toBe('Missed twice');
    expect(Number(again.events[0]!.id)).toBeGreaterThan(Number(seen!.id));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(again.events).toHaveLength(1);
    again.close();
  });

  it('a Last-Event-ID older than the replay window (or not an id): the head as it is now, since a change may have been missed', async () => {
    const id = ids[51]!;
    const old = await sse(url, id, String(Date.now() - 10 * 60_000));
    await until(() => old.events.length === 1, 'the head as it is now');
    expect(nameIn(old.events[0])).toBe(t.reference.store.findHead(id)!.head.name);
    old.close();
    const junk = await sse(url, id, 'not-an-id');
    await until(() => t.subscriptions.open() === 1, 'open');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(junk.events).toEqual([]);
    junk.close();
  });
});

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
});
