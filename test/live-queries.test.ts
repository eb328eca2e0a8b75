import { encodeGlobalID } from '@pothos/plugin-relay';
import type { Client } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { gather } from './support/gather.js';
import { sampleOf } from './support/metrics.js';
import { sseClients } from './support/sse.js';
import { until } from './support/until.js';

/*
 * Live queries (server/real-time/live-queries.ts): a query marked @live is answered as a stream,
 * its first result at once, then sent again whenever a head it read changes, at most once per
 * SUBSCRIPTION_LIVE_THROTTLE_MS; a live heads(first:) is a list view that stays current.
 */

const globalId = (id: string) => encodeGlobalID('Head', id);
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }';
const LIST = 'query Heads @live { heads(first: 3) { nodes { id name } } }';

type Result = {
  data?: { heads: { nodes: { id: string; name: string }[] } };
  errors?: { extensions?: { code?: string } }[];
};

const live = (client: Client, query: string) => gather(client.iterate({ query }) as AsyncIterableIterator<Result>);

describe('@live queries (SUBSCRIPTION_LIVE_THROTTLE_MS=2000)', () => {
  let t: TestGateway;
  let url: string;
  const clients = sseClients(() => url);
  const sse = clients.client;
  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBSCRIPTION_LIVE_THROTTLE_MS: '2000' } });
    url = await t.listen();
  });
  afterAll(async () => {
    clients.dispose();
    await t.close();
  });

  it('a live list view: its first page at once, then again when a head on it changes, not when another does; changes within the throttle sent together', async () => {
    const view = live(sse(), LIST);
    await until(() => view.results.length === 1, 'the first result');
    const listed = view.results[0]!.data!.heads.nodes;
    expect(listed).toHaveLength(3);
    const [first, second] = listed.map((node) => node.id);
    const elsewhere = t.reference.store.headIds().find((id) => !listed.some((node) => node.id === globalId(id)))!;
    await t.execute(UPDATE, { input: { id: elsewhere, name: 'Not on the page' } });
    await t.execute(UPDATE, { input: { id: first, name: 'Renamed once' } });
    await t.execute(UPDATE, { input: { id: second, name: 'Renamed too' } });
    await until(() => view.results.length >= 2, 'the page sent again');
    // One more change once that result is out: the next result is its own, so nothing came between.
    await t.execute(UPDATE, { input: { id: first, name: 'Renamed again' } });
    await until(() => view.results.length >= 3, 'the page sent a third time');
    // The two changes to the page within the throttle: one result with both.
    expect(view.results).toHaveLength(3);
    expect(view.results[1]!.data!.heads.nodes.map((node) => node.name).slice(0, 2)).toEqual([
      'Renamed once',
      'Renamed too',
    ]);
    expect(view.results[2]!.data!.heads.nodes[0]!.name).toBe('Renamed again');
    expect(t.subscriptions.open()).toBe(1);
    await view.stop();
    await until(() => t.subscriptions.open() === 0, 'closed with its client');
  });

  it('is refused for a client that takes no stream (406), and @live is declared on queries only', async () => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ query: LIST }),
    });
    expect(response.status).toBe(406);
    const onMutation = await t.execute(
      'mutation @live { login(input: { username: "x", password: "y" }) { accessToken } }',
    );
    expect(onMutation.errors?.[0]?.message).toMatch(/Directive "@live" may not be used on MUTATION/);
  });
});

describe('a live query never goes silent (SUBSCRIPTION_LIVE_THROTTLE_MS=0, CIRCUIT_BREAKER_RESET_MS=100)', () => {
  let t: TestGateway;
  let url: string;
  const clients = sseClients(() => url);
  const sse = clients.client;
  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBSCRIPTION_LIVE_THROTTLE_MS: '0', CIRCUIT_BREAKER_RESET_MS: '100' } });
    url = await t.listen();
  });
  afterAll(async () => {
    clients.dispose();
    await t.close();
  });
  const code = (result: Result) => result.errors?.[0]?.extensions?.code;

  it('a re-run the upstream fails is sent with its code and keeps what the query watches: the next change is sent', async () => {
    const view = live(sse(), LIST);
    await until(() => view.results.length === 1, 'the first result');
    const [first, second] = view.results[0]!.data!.heads.nodes.map((node) => node.id);
    t.reference.injectFault('listHeads', { kind: 'status', status: 503 }, 1_000);
    for (let failed = 1; failed <= 3; failed++) {
      await t.execute(UPDATE, { input: { id: first, name: `Failed ${failed}` } });
      await until(() => view.results.length === 1 + failed, `failed run ${failed} sent`);
      expect(code(view.results[failed]!)).toMatch(/^UPSTREAM_/);
    }
    t.reference.clearFaults();
    // The listing's breaker, opened by the failures, lets a probe through again once a read passes.
    await until(
      async () => (await t.execute('{ heads(first: 1) { nodes { id } } }')).errors === undefined,
      'the listing served again',
    );
    await t.execute(UPDATE, { input: { id: second, name: 'Served again' } });
    await until(
      () => view.results.some((result) => result.data?.heads.nodes.some((node) => node.name === 'Served again')),
      'the next change sent',
    );
    expect(view.ended).toBe(false);
    await view.stop();
  });

  it('one whose first run fails watches nothing: its stream ends after that result', async () => {
    t.reference.injectFault('listHeads', { kind: 'status', status: 503 }, 1_000);
    const view = live(sse(), LIST);
    await until(() => view.ended, 'the stream ended');
    expect(view.results).toHaveLength(1);
    expect(code(view.results[0]!)).toMatch(/^UPSTREAM_/);
    t.reference.clearFaults();
    await until(() => t.subscriptions.open() === 0, 'nothing open');
  });

  it('one over a head that does not exist (its read 404) watches nothing: its stream ends after its first result', async () => {
    const view = live(sse(), 'query Missing @live { head(id: "0b1ab1e5-0000-4000-8000-000000000000") { name } }');
    await until(() => view.ended, 'the stream ended');
    expect(view.results).toHaveLength(1);
    expect(view.results[0]).toMatchObject({ data: { head: null }, errors: [{ extensions: { code: 'NOT_FOUND' } }] });
    await until(() => t.subscriptions.open() === 0, 'nothing open');
    // Its duration is its stream's: counted as `live`, apart from the queries a latency objective reads.
    const text = await t.metrics.registry.metrics();
    const series = (type: string) =>
      `gateway_operation_duration_seconds_count{operation="Missing",type="${type}",outcome="ok"}`;
    await until(
      async () => sampleOf(await t.metrics.registry.metrics(), series('live')) === 1,
      'the live query recorded',
    );
    expect(sampleOf(text, series('query'))).toBeUndefined();
  });
});
