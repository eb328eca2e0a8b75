import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { encodeGlobalID } from '@pothos/plugin-relay';
import { type Client, createClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { gather } from './support/gather.js';
import { type GatewayProcess, startGatewayProcess } from './support/process.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { subscribeSse } from './support/sse.js';
import { until } from './support/until.js';

/*
 * Subscriptions (server/real-time/subscriptions.ts) on the one path: `headChanged(id:)` over GraphQL
 * over SSE (the graphql-sse client, distinct connections) and Apollo's multipart protocol, an event
 * per change resolved with the subscriber's own token, shared by subscribers with the same token,
 * document and variables; refused for clients that take no stream, in batches, over the limits.
 */

const globalId = (id: string) => encodeGlobalID('Head', id);
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id name } } }';
const DELETE = 'mutation($input: DeleteHeadInput!) { deleteHead(input: $input) { deletedHeadUuid } }';
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { id head { name } } }';

type Change = { headChanged: { id: string; head: { name: string } | null } };

type Result = { data?: Change; errors?: { message: string; extensions?: { code?: string } }[] };

/** A subscription through `client`, its results gathered as they come. */
const subscribe = (client: Client, query: string, variables: Record<string, unknown>) =>
  gather(client.iterate<Change>({ query, variables }) as AsyncIterableIterator<Result>);

describe('Subscription.headChanged over SSE and multipart (the defaults)', () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  let token: string;
  const clients: Client[] = [];
  const sse = (headers: Record<string, string> = {}) => {
    const client = createClient({ url, headers, retryAttempts: 0 });
    clients.push(client);
    return client;
  };
  beforeAll(async () => {
    t = await startTestGateway();
    url = await t.listen();
    ids = t.reference.store.headIds();
    const login = await t.execute<{ login: { accessToken: string } }>(
      'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
      { input: DEMO_CREDENTIALS },
    );
    token = login.data!.login.accessToken;
  });
  afterAll(async () => {
    for (const client of clients) client.dispose();
    await t.close();
  });

  it('sends each change with the head as it is now, one upstream read per change for subscribers that share token, document and variables', async () => {
    const id = ids[20]!;
    const subscribers = [sse(), sse(), sse()].map((client) => subscribe(client, WATCH, { id: globalId(id) }));
    await until(() => t.subscriptions.open() === 3, 'three subscriptions open');
    t.reset();
    expect((await t.execute(UPDATE, { input: { id: globalId(id), name: 'Seen by three' } })).errors).toBeUndefined();
    await until(() => subscribers.every((s) => s.results.length === 1), 'the change sent to each');
    for (const s of subscribers)
      expect(s.results[0]).toEqual({ data: { headChanged: { id: globalId(id), head: { name: 'Seen by three' } } } });
    // The update itself, then one read of the head for the three. (The head's polling reads, Get Head Ext, at its
    // first watch and each interval, go on beside them: test/head-polling.test.ts counts those.)
    const calls = t.calls().filter((call) => call.operation !== 'getHeadExt');
    expect(calls.map((call) => call.operation)).toEqual(['updateHead', 'getHeadById']);
    await Promise.all(subscribers.map((s) => s.stop()));
    await until(() => t.subscriptions.open() === 0, 'every subscription closed with its client');
  });

  it('reads the head with each subscriber’s own token: two tokens, two reads, each with its own', async () => {
    const id = ids[21]!;
    const withToken = subscribe(sse({ authorization: `Bearer ${token}` }), WATCH, { id });
    const without = subscribe(sse(), WATCH, { id });
    await until(() => t.subscriptions.open() === 2, 'both open');
    t.reset();
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Two tokens' } });
    await until(() => withToken.results.length === 1 && without.results.length === 1, 'both sent');
    const reads = t.calls('getHeadById');
    expect(reads.map((read) => read.headers.authorization ?? null).sort()).toEqual([`Bearer ${token}`, null].sort());
    await Promise.all([withToken.stop(), without.stop()]);
  });

  it('ends the stream after the head is deleted, its last event saying so without a read', async () => {
    const id = ids[22]!;
    const s = subscribe(sse({ authorization: `Bearer ${token}` }), WATCH, { id });
    await until(() => t.subscriptions.open() === 1, 'open');
    t.reset();
    expect(
      (await t.execute(DELETE, { input: { id: globalId(id) } }, { authorization: `Bearer ${token}` })).errors,
    ).toBeUndefined();
    await until(() => s.ended, 'the stream ended');
    expect(s.results).toEqual([{ data: { headChanged: { id: globalId(id), head: null } } }]);
    expect(t.calls('getHeadById')).toEqual([]);
    expect(t.subscriptions.open()).toBe(0);
  });

  it('refuses an invalid id before it listens, with the input error of head(id:)', async () => {
    const s = subscribe(sse(), WATCH, { id: 'not-a-head' });
    await until(() => s.ended, 'the stream ended');
    expect(s.results[0]?.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(t.subscriptions.open()).toBe(0);
  });

  it('answers a client that takes no stream 406 NOT_ACCEPTABLE, and a batched subscription 400, before anything runs', async () => {
    const asJson = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query: WATCH, variables: { id: ids[0] } }),
    });
    expect(asJson.status).toBe(406);
    expect(((await asJson.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe(
      'NOT_ACCEPTABLE',
    );
    const batched = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify([{ query: WATCH, variables: { id: ids[0] } }]),
    });
    expect(
      ((await batched.json()) as { errors: { extensions: { code: string } }[] }[])[0]!.errors[0]!.extensions.code,
    ).toBe('BAD_REQUEST');
    expect(t.subscriptions.open()).toBe(0);
  });

  it('speaks Apollo\'s multipart subscriptions: each event a {"payload": …} part, the stream ended as the process stops', async () => {
    const id = ids[23]!;
    const controller = new AbortController();
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'multipart/mixed;boundary="graphql";subscriptionSpec=1.0,application/json',
      },
      body: JSON.stringify({ query: WATCH, variables: { id } }),
      signal: controller.signal,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('multipart/mixed; boundary="graphql"; subscriptionSpec="1.0"');
    let text = '';
    const reading = (async () => {
      const decoder = new TextDecoder();
      const reader = response.body!.getReader();
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        text += decoder.decode(chunk.value, { stream: true });
    })();
    await until(() => t.subscriptions.open() === 1, 'open');
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Multipart' } });
    await until(() => text.includes('"payload"'), 'the event');
    t.subscriptions.completeAll();
    await reading;
    const parts = text
      .split('\r\n--graphql')
      .map((part) => part.split('\r\n\r\n')[1])
      .filter((body) => body !== undefined);
    expect(parts.map((body) => JSON.parse(body))).toEqual([
      { payload: { data: { headChanged: { id: globalId(id), head: { name: 'Multipart' } } } } },
    ]);
    expect(text.endsWith('\r\n--graphql--\r\n')).toBe(true);
  });
});

describe('SUBSCRIPTIONS_PER_CALLER=2, SHED_MAX_IN_FLIGHT=1', () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  const clients: Client[] = [];
  beforeAll(async () => {
    // Callers told apart by address (TRUST_PROXY): a token is a caller of its own once known to be real.
    t = await startTestGateway({
      env: { SUBSCRIPTIONS_PER_CALLER: '2', SHED_MAX_IN_FLIGHT: '1', TRUST_PROXY: 'true' },
    });
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(async () => {
    for (const client of clients) client.dispose();
    await t.close();
  });

  it('refuses a caller’s third subscription SUBSCRIPTION_LIMIT; open streams hold no in-flight slot, so a query is still answered', async () => {
    const client = (address: string) => {
      const made = createClient({ url, headers: { 'x-forwarded-for': address }, retryAttempts: 0 });
      clients.push(made);
      return made;
    };
    const open = [
      subscribe(client('192.0.2.1'), WATCH, { id: ids[0] }),
      subscribe(client('192.0.2.1'), WATCH, { id: ids[1] }),
    ];
    await until(() => t.subscriptions.open() === 2, 'two open');
    const third = subscribe(client('192.0.2.1'), WATCH, { id: ids[2] });
    await until(() => third.ended, 'the third refused');
    // Refused before its stream began: HTTP 429, the error in its one event (graphql-sse's client throws with the
    // response).
    const refused = (await third.failure) as { response: Response };
    expect(refused.response.status).toBe(429);
    expect(await refused.response.text()).toContain('"code":"SUBSCRIPTION_LIMIT"');
    // Another caller has its own count.
    const other = subscribe(client('192.0.2.2'), WATCH, { id: ids[2] });
    await until(() => t.subscriptions.open() === 3, 'another caller’s open');
    expect((await t.execute('{ heads(first: 1) { totalCount } }')).errors).toBeUndefined();
    await Promise.all([...open, other].map((s) => s.stop()));
  });
});

describe('TRUSTED_DOCUMENTS_ONLY=true (the committed manifest)', () => {
  it('streams a subscription named by its documentId: each event runs the document its request named, never refused as a query text', async () => {
    const manifest = fileURLToPath(new URL('../src/generated/persisted-documents.json', import.meta.url));
    const t = await startTestGateway({ env: { TRUSTED_DOCUMENTS_FILE: manifest, TRUSTED_DOCUMENTS_ONLY: 'true' } });
    try {
      const url = await t.listen();
      const id = t.reference.store.headIds()[5]!;
      const documentId = Object.entries(JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, string>).find(
        ([, text]) => text.startsWith('subscription WatchHead'),
      )![0];
      const s = subscribeSse({ url, documentId, variables: { id: globalId(id) } });
      await until(() => t.subscriptions.open() === 1, 'open');
      t.headEvents.publish({ id });
      await until(() => s.events.length === 1, 'the event');
      const event = JSON.parse(s.events[0]!.data) as {
        data?: { headChanged: { head: { name: string } } };
        errors?: unknown;
      };
      expect(event.errors).toBeUndefined();
      expect(event.data?.headChanged.head.name).toBe(t.reference.store.findHead(id)?.head.name);
      s.close();
    } finally {
      await t.close();
    }
  });
});

describeWithRedis('two gateway processes over one Redis', () => {
  let redis: RedisProcess;
  let reference: ReferenceUpstream;
  const processes: GatewayProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    reference = await startReferenceUpstream();
    for (let i = 0; i < 2; i++)
      processes.push(
        await startGatewayProcess({ UPSTREAM_URL: reference.url, REDIS_URL: redis.url, LOG_LEVEL: 'warn' }),
      );
  }, 60_000);
  afterAll(async () => {
    for (const gateway of processes) gateway.kill();
    await reference?.close();
    await redis?.stop();
  });

  it('a write through one process is an event at the other’s subscriber, read once there', async () => {
    const [a, b] = processes as [GatewayProcess, GatewayProcess];
    const id = reference.store.headIds()[24]!;
    const subscriber = subscribeSse({ url: b.endpoint, query: WATCH, variables: { id } });
    try {
      // Subscribed at b once a write through a reaches it.
      let n = 0;
      const post = (name: string) =>
        fetch(a.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: UPDATE, variables: { input: { id: globalId(id), name } } }),
        });
      await until(
        async () => {
          await post(`warm-up ${n++}`);
          return subscriber.events.some((event) => event.event === 'next');
        },
        'b subscribed',
        20_000,
        200,
      );
      const events = () => subscriber.events.filter((event) => event.event === 'next');
      // The warm-up's last events read and sent: nothing of theirs is left in flight.
      let settled = -1;
      await until(async () => {
        const seen = events().length;
        await new Promise((resolve) => setTimeout(resolve, 200));
        if (seen !== events().length) return false;
        settled = seen;
        return true;
      }, 'the warm-up settled');
      const before = settled;
      reference.resetRecording();
      await post('Across processes');
      await until(
        () => events().length > before && events().at(-1)!.data.includes('Across processes'),
        'the event at b',
      );
      expect(reference.requests.map((request) => request.operation)).toEqual(['updateHead', 'getHeadById']);
    } finally {
      subscriber.close();
    }
  }, 60_000);
});

describe('WORKERS=2 without Redis', () => {
  let reference: ReferenceUpstream;
  let gateway: GatewayProcess;
  beforeAll(async () => {
    reference = await startReferenceUpstream();
    gateway = await startGatewayProcess({
      UPSTREAM_URL: reference.url,
      WORKERS: '2',
      SUBSCRIPTION_POLL_MS: '0',
      LOG_LEVEL: 'warn',
    });
  }, 60_000);
  afterAll(async () => {
    gateway?.kill();
    await reference?.close();
  });

  it('a write through one worker is an event at the subscribers of both (through the primary)', async () => {
    const id = reference.store.headIds()[25]!;
    // Connections go round the workers: six subscribers are at both.
    const subscribers = Array.from({ length: 6 }, () =>
      subscribeSse({ url: gateway.endpoint, query: WATCH, variables: { id } }),
    );
    try {
      const events = (subscriber: (typeof subscribers)[number]) =>
        subscriber.events.filter((event) => event.event === 'next');
      // Subscribed: each has its stream open (its first bytes came).
      await until(() => subscribers.every((subscriber) => subscriber.opened), 'every subscriber subscribed');
      const write = await fetch(gateway.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: UPDATE, variables: { input: { id: globalId(id), name: 'Through one worker' } } }),
      });
      expect(((await write.json()) as { errors?: unknown }).errors).toBeUndefined();
      await until(
        () => subscribers.every((subscriber) => events(subscriber).length === 1),
        'the event at every subscriber',
      );
      for (const subscriber of subscribers) expect(events(subscriber)[0]!.data).toContain('Through one worker');
    } finally {
      for (const subscriber of subscribers) subscriber.close();
    }
  }, 60_000);
});
