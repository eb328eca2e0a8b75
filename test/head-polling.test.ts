import { encodeGlobalID } from '@pothos/plugin-relay';
import { type Client, createClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { gather } from './support/gather.js';
import { sampleOf } from './support/metrics.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { sseClients } from './support/sse.js';
import { until } from './support/until.js';

/*
 * Changes made outside the gateway (server/real-time/head-polling.ts): each watched head read every
 * SUBSCRIPTION_POLL_MS, one read per head per interval however many subscribers (and, with
 * REDIS_URL, replicas) and one as a head is first watched (its baseline); a difference (of Get
 * Head Ext By Id, variant A: `head_metadata` included) is a change, a 404 a deletion, a failed read
 * neither. The changes are made through the reference upstream's own endpoints, past the gateway.
 */

const POLL_MS = 200;
const globalId = (id: string) => encodeGlobalID('Head', id);
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { id head { name } } }';

type Result = {
  data?: { headChanged: { id: string; head: { name: string } | null } };
  errors?: { extensions?: { code?: string } }[];
};

const subscribe = (client: Client, id: string) =>
  gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);

/** A change past the gateway: the reference upstream's own Update Head, or Delete Head with the demo user's token. */
async function outside(t: TestGateway, method: 'PATCH' | 'DELETE', id: string, body?: object) {
  const login = await fetch(`${t.reference.url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(DEMO_CREDENTIALS as Record<string, string>),
  });
  const { access_token: token } = (await login.json()) as { access_token: string };
  const response = await fetch(`${t.reference.url}/heads/${id}`, {
    method,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  expect(response.ok).toBe(true);
}

/**
 * Poll reads (without a token) the reference upstream saw since its recording was last reset: of head `id`, or of any.
 */
const pollReads = (t: TestGateway, id?: string) =>
  t
    .calls('getHeadExt')
    .filter((call) => call.headers.authorization === undefined && (id === undefined || call.path.includes(`/${id}/`)))
    .length;

describe(`SUBSCRIPTION_POLL_MS=${POLL_MS}`, () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  const clients = sseClients(() => url);
  const sse = clients.client;
  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBSCRIPTION_POLL_MS: String(POLL_MS) } });
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(async () => {
    clients.dispose();
    await t.close();
  });

  it('sends a change made outside the gateway, reading the head once per interval for three subscribers', async () => {
    const id = ids[40]!;
    const subscribers = [sse(), sse(), sse()].map((client) => subscribe(client, id));
    await until(() => t.subscriptions.open() === 3, 'three open');
    // The first read sets what the head was.
    await until(() => pollReads(t, id) > 0, 'a first poll read of the head');
    await outside(t, 'PATCH', id, { name: 'Changed elsewhere' });
    await until(() => subscribers.every((s) => s.results.length === 1), 'the change sent to each', 5_000, 10);
    for (const s of subscribers)
      expect(s.results[0]).toEqual({
        data: { headChanged: { id: globalId(id), head: { name: 'Changed elsewhere' } } },
      });
    // Over a few intervals: one poll read per interval, not one per subscriber.
    t.reset();
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 5 + POLL_MS / 2));
    // (Five and a half intervals: five reads, give or take the timers of a busy machine; three subscribers reading each
    // would make fifteen.)
    expect(pollReads(t, id)).toBeGreaterThanOrEqual(2);
    expect(pollReads(t, id)).toBeLessThanOrEqual(6);
    expect(subscribers.every((s) => s.results.length === 1)).toBe(true);
    await Promise.all(subscribers.map((s) => s.stop()));
    // The last watcher gone: no more reads.
    await until(() => t.subscriptions.open() === 0, 'closed');
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    t.reset();
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 3));
    expect(pollReads(t)).toBe(0);
  });

  it('a head deleted elsewhere: its subscribers get a null head and their streams end; a failed read is neither a change nor a deletion', async () => {
    const id = ids[41]!;
    const s = subscribe(sse(), id);
    await until(() => pollReads(t, id) > 0, 'a first poll read of the head');
    t.reference.injectFault('getHeadExt', { kind: 'status', status: 503 }, 3);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 3));
    expect(s.results).toEqual([]);
    expect(s.ended).toBe(false);
    await outside(t, 'DELETE', id);
    await until(() => s.ended, 'the stream ended', 5_000, 10);
    expect(s.results).toEqual([{ data: { headChanged: { id: globalId(id), head: null } } }]);
    const metrics = await t.metrics.registry.metrics();
    expect(sampleOf(metrics, 'gateway_poll_reads_total{outcome="failed"}')).toBeGreaterThan(0);
    expect(sampleOf(metrics, 'gateway_poll_reads_total{outcome="deleted"}')).toBe(1);
    expect(sampleOf(metrics, 'gateway_streams_cut_total{reason="deleted"}')).toBe(1);
  });

  it('a write through the gateway is sent once: the poll that reads it afterwards finds no difference its subscriber would see', async () => {
    const id = ids[42]!;
    const s = subscribe(sse(), id);
    await until(() => pollReads(t, id) > 0, 'a first poll read of the head');
    const login = await t.execute<{ login: { accessToken: string } }>(
      'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
      { input: DEMO_CREDENTIALS },
    );
    expect(login.errors).toBeUndefined();
    await t.execute('mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }', {
      input: { id: globalId(id), name: 'Once' },
    });
    await until(() => s.results.length === 1, 'the write sent');
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 4));
    expect(s.results.map((result) => result.data?.headChanged.head?.name)).toEqual(['Once']);
    await s.stop();
  });
});

describe('SUBSCRIPTION_POLL_MS=1000: what polling sees', () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  const clients = sseClients(() => url);
  const sse = clients.client;
  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBSCRIPTION_POLL_MS: '1000' } });
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(async () => {
    clients.dispose();
    await t.close();
  });

  it('a change in the first interval after a head is first watched: its baseline was read as it was watched, so the change is sent', async () => {
    const id = ids[44]!;
    t.reset();
    const s = subscribe(sse(), id);
    // As soon as it is open: its baseline read went out as it was watched, long before the first interval ends.
    await until(() => t.subscriptions.open() === 1, 'open');
    await outside(t, 'PATCH', id, { name: 'Changed in the first interval' });
    await until(() => s.results.length === 1, 'the change sent', 5_000, 10);
    expect(s.results[0]!.data?.headChanged.head?.name).toBe('Changed in the first interval');
    await s.stop();
  });

  it('a change to head_metadata alone is a change', async () => {
    const id = ids[45]!;
    t.reset();
    const s = subscribe(sse(), id);
    await until(() => pollReads(t, id) === 1, 'the baseline read');
    await outside(t, 'PATCH', id, { head_metadata: { changed: 'elsewhere' } });
    await until(() => s.results.length === 1, 'the change sent', 5_000, 10);
    await s.stop();
  });
});

describeWithRedis(`two replicas over Redis, SUBSCRIPTION_POLL_MS=${POLL_MS}`, () => {
  let redis: RedisProcess;
  let a: TestGateway;
  let b: TestGateway;
  const clients: Client[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    const env = { REDIS_URL: redis.url, SUBSCRIPTION_POLL_MS: String(POLL_MS) };
    a = await startTestGateway({ env });
    b = await startTestGateway({ env, reference: a.reference });
  });
  afterAll(async () => {
    for (const client of clients) client.dispose();
    await b?.close();
    await a?.close();
    await redis?.stop();
  });

  it('one read per head per interval for both, and a change found by either reaches the subscribers of both', async () => {
    const id = a.reference.store.headIds()[43]!;
    const [onA, onB] = await Promise.all(
      [a, b].map(async (gateway) => {
        const client = createClient({ url: await gateway.listen(), retryAttempts: 0 });
        clients.push(client);
        return subscribe(client, id);
      }),
    );
    await until(() => a.subscriptions.open() === 1 && b.subscriptions.open() === 1, 'open on both');
    await until(() => pollReads(a, id) > 0, 'a first poll read of the head');
    a.reset();
    await new Promise((resolve) => setTimeout(resolve, POLL_MS * 5 + POLL_MS / 2));
    // Both replicas read through the one reference upstream (a's): one read per interval between them.
    expect(pollReads(a, id)).toBeGreaterThanOrEqual(2);
    expect(pollReads(a, id)).toBeLessThanOrEqual(6);
    await outside(a, 'PATCH', id, { name: 'Seen by the fleet' });
    await until(() => onA!.results.length === 1 && onB!.results.length === 1, 'sent on both', 5_000, 10);
    expect(onB!.results[0]!.data?.headChanged.head?.name).toBe('Seen by the fleet');
    await Promise.all([onA!.stop(), onB!.stop()]);
  });

  it('a replica that never held the lease keeps the fleet’s baseline: through a Redis outage its subscriber is sent a change made elsewhere', async () => {
    const id = a.reference.store.headIds()[46]!;
    const watch = async (gateway: TestGateway) => {
      const client = createClient({ url: await gateway.listen(), retryAttempts: 0 });
      clients.push(client);
      return subscribe(client, id);
    };
    a.reset();
    const onA = await watch(a);
    await until(() => pollReads(a, id) >= 1, 'a read the head and shared its digest');
    // Nobody takes the lease from now on: b, which never held it, only ever sees the digest a shared.
    await a.redis!.client.set(`gw:poll:{${id}}`, 'held by another replica', 'PX', 60_000);
    const onB = await watch(b);
    await until(() => b.subscriptions.open() === 1, 'open at b');
    const watchedSince = Date.now();
    await until(() => Date.now() > watchedSince + 3 * POLL_MS, 'b watched for three intervals');
    await redis.stop();
    await until(() => !a.redis!.ready() && !b.redis!.ready(), 'both see Redis gone');
    await outside(a, 'PATCH', id, { name: 'Changed during the outage' });
    // Each replica reads on its own now, against the baseline it kept: each tells its own subscriber.
    await until(() => onA.results.length === 1 && onB.results.length === 1, 'sent on both', 5_000, 10);
    expect(onB.results[0]!.data?.headChanged.head?.name).toBe('Changed during the outage');
    await Promise.all([onA.stop(), onB.stop()]);
    await redis.start();
  });
});
