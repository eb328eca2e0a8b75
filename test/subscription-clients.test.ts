import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { encodeGlobalID } from '@pothos/plugin-relay';
import { fetchExchange, subscriptionExchange, Client as UrqlClient } from '@urql/core';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { until } from './support/until.js';

/*
 * Subscriptions as each client library makes them, on their defaults, against the gateway on a
 * loopback port: graphql-ws over WebSocket (its token in connection_init), Apollo Client over
 * multipart HTTP (its HttpLink) and over WebSocket (GraphQLWsLink), urql over graphql-ws.
 */

const globalId = (id: string) => encodeGlobalID('Head', id);
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id name } } }';
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { id head { name } } }';

type Change = { headChanged: { id: string; head: { name: string } | null } };

describe('subscription clients on their defaults', () => {
  let t: TestGateway;
  let url: string;
  let wsUrl: string;
  let ids: string[];
  let token: string;
  const closers: (() => unknown)[] = [];
  const wsClient = (connectionParams: Record<string, unknown> = {}): WsClient => {
    const client = createWsClient({
      url: wsUrl,
      webSocketImpl: WebSocket,
      connectionParams,
      retryAttempts: 0,
      lazy: true,
    });
    closers.push(() => client.dispose());
    return client;
  };
  /** A change made through the gateway, once `open` subscriptions are open. */
  const changeOnce = async (id: string, name: string, open = 1) => {
    await until(() => t.subscriptions.open() === open, `${open} subscription(s) open`);
    expect((await t.execute(UPDATE, { input: { id: globalId(id), name } })).errors).toBeUndefined();
  };
  beforeAll(async () => {
    t = await startTestGateway();
    url = await t.listen();
    wsUrl = url.replace(/^http/, 'ws');
    ids = t.reference.store.headIds();
    const login = await t.execute<{ login: { accessToken: string } }>(
      'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
      { input: DEMO_CREDENTIALS },
    );
    token = login.data!.login.accessToken;
  });
  afterAll(async () => {
    for (const close of closers) await close();
    await t.close();
  });

  it('graphql-ws: an event per change, read with the token connection_init carried; a query on the same socket', async () => {
    const id = ids[30]!;
    const client = wsClient({ Authorization: `Bearer ${token}` });
    const iterator = client.iterate<Change>({ query: WATCH, variables: { id } });
    const first = iterator.next();
    t.reset();
    await changeOnce(id, 'Over WebSocket');
    expect((await first).value).toEqual({
      data: { headChanged: { id: globalId(id), head: { name: 'Over WebSocket' } } },
    });
    expect(t.calls('getHeadById').map((call) => call.headers.authorization)).toEqual([`Bearer ${token}`]);
    const query = await client
      .iterate<{ heads: { totalCount: number } }>({ query: '{ heads(first: 1) { totalCount } }' })
      .next();
    expect(query.value?.data?.heads.totalCount).toBeGreaterThan(0);
    await iterator.return?.();
    await until(() => t.subscriptions.open() === 0, 'closed by its client');
  });

  it('graphql-ws: an invalid document is an error message, before anything runs', async () => {
    const client = wsClient();
    const failed = await client
      .iterate({ query: 'subscription { headChanged(id: "x") { nope } }' })
      .next()
      .then(
        () => undefined,
        (errors: unknown) => errors,
      );
    expect((failed as { message: string }[])[0]!.message).toMatch(/Cannot query field "nope"/);
    expect(t.subscriptions.open()).toBe(0);
  });

  it('Apollo Client: over its HttpLink (multipart subscriptions), and over GraphQLWsLink', async () => {
    const document = gql(WATCH);
    const overHttp = new ApolloClient({ link: new HttpLink({ uri: url }), cache: new InMemoryCache() });
    const overWs = new ApolloClient({ link: new GraphQLWsLink(wsClient()), cache: new InMemoryCache() });
    closers.push(
      () => overHttp.stop(),
      () => overWs.stop(),
    );
    for (const [client, name, i] of [
      [overHttp, 'Apollo over HTTP', 31],
      [overWs, 'Apollo over WebSocket', 32],
    ] as const) {
      const id = ids[i]!;
      const seen: unknown[] = [];
      const subscription = client
        .subscribe<Change>({ query: document, variables: { id } })
        .subscribe({ next: (result) => seen.push(result.data) });
      await changeOnce(id, name);
      await until(() => seen.length === 1, `${name}: the event`);
      expect(seen[0]).toMatchObject({ headChanged: { id: globalId(id), head: { name } } });
      subscription.unsubscribe();
      await until(() => t.subscriptions.open() === 0, `${name}: closed`);
    }
  });

  it('urql: over graphql-ws (its subscriptionExchange)', async () => {
    const ws = wsClient();
    const client = new UrqlClient({
      url,
      exchanges: [
        subscriptionExchange({
          forwardSubscription: (request) => ({
            subscribe: (sink) => ({ unsubscribe: ws.subscribe({ ...request, query: request.query ?? '' }, sink) }),
          }),
        }),
        fetchExchange,
      ],
    });
    const id = ids[33]!;
    const seen: unknown[] = [];
    const { unsubscribe } = client.subscription(WATCH, { id }).subscribe((result) => seen.push(result.data));
    await changeOnce(id, 'urql');
    await until(() => seen.length === 1, 'the event');
    expect(seen[0]).toMatchObject({ headChanged: { head: { name: 'urql' } } });
    unsubscribe();
    await until(() => t.subscriptions.open() === 0, 'closed');
  });

  it('the stop: each stream completed, then every socket closed 1001 (going away), so clients reconnect elsewhere', async () => {
    const client = createWsClient({ url: wsUrl, webSocketImpl: WebSocket, retryAttempts: 0 });
    closers.push(() => client.dispose());
    const closed = new Promise<number>((resolve) =>
      client.on('closed', (event) => resolve((event as { code: number }).code)),
    );
    const iterator = client.iterate<Change>({ query: WATCH, variables: { id: ids[34] } });
    const first = iterator.next();
    await until(() => t.subscriptions.open() === 1, 'open');
    // What the process does on stop, once SHUTDOWN_DELAY_MS has passed (main.ts).
    t.subscriptions.completeAll();
    expect(await first).toEqual({ done: true, value: undefined });
    t.websocket.close();
    expect(await closed).toBe(1001);
    expect(t.subscriptions.open()).toBe(0);
  });
});

describe('urql over plain multipart (fetchSubscriptions), SUBSCRIPTION_HEARTBEAT_MS=100', () => {
  let t: TestGateway;
  let url: string;
  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBSCRIPTION_HEARTBEAT_MS: '100' } });
    url = await t.listen();
  });
  afterAll(() => t.close());

  it('reads its events between heartbeats, and a stream that ends after one completes without an error', async () => {
    // What urql's fetch read, as it came.
    let raw = '';
    const teeing: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const [mine, theirs] = response.body!.tee();
      void (async () => {
        const decoder = new TextDecoder();
        for await (const chunk of mine as unknown as AsyncIterable<Uint8Array>)
          raw += decoder.decode(chunk, { stream: true });
      })();
      return new Response(theirs, { status: response.status, headers: response.headers });
    };
    const client = new UrqlClient({ url, exchanges: [fetchExchange], fetchSubscriptions: true, fetch: teeing });
    const id = t.reference.store.headIds()[35]!;
    const seen: { data?: unknown; error?: unknown }[] = [];
    client.subscription(WATCH, { id }).subscribe((result) => seen.push({ data: result.data, error: result.error }));
    await until(() => t.subscriptions.open() === 1, 'open');
    await until(() => /^\r\n--- {2,}$/.test(raw), 'two heartbeats before any event');
    expect((await t.execute(UPDATE, { input: { id: globalId(id), name: 'urql, multipart' } })).errors).toBeUndefined();
    await until(() => seen.length === 1, 'the event');
    await until(() => / {2,}$/.test(raw), 'two heartbeats after it');
    // The process stops: the stream ends after its heartbeats.
    t.subscriptions.completeAll();
    await until(() => raw.endsWith('-----\r\n'), 'the end');
    await until(() => t.subscriptions.open() === 0, 'closed');
    expect(seen.every((result) => result.error === undefined)).toBe(true);
    expect(seen[0]!.data).toMatchObject({ headChanged: { head: { name: 'urql, multipart' } } });
  });
});
