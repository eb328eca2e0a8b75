import { encodeGlobalID } from '@pothos/plugin-relay';
import type { ExecutionResult } from 'graphql';
import { type Client, createClient as createSseClient } from 'graphql-sse';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { gather } from './support/gather.js';
import { sampleOf } from './support/metrics.js';
import { until } from './support/until.js';

/*
 * A subscription's event is nobody's request: the gateway resolves each change once for the
 * subscribers that share a token, document and variables, on their behalf, without charging any
 * of them, and sheds events as a class, before any client's operation. Over real HTTP, callers
 * told apart by address (TRUST_PROXY and X-Forwarded-For).
 */

const globalId = (id: string) => encodeGlobalID('Head', id);
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { head { name } } }';
const READ = 'query($id: ID!) { head(id: $id) { name } }';

type Result = ExecutionResult & { errors?: { extensions?: { code?: string } }[] };

const from = (address: string) => ({ 'x-forwarded-for': address });

describe('RATE_LIMIT_REQUESTS_PER_SECOND=1, RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND=1, RATE_LIMIT_WINDOW_SECONDS=6 (six of each a window), TRUST_PROXY=1', () => {
  let t: TestGateway;
  let url: string;
  const clients: Client[] = [];
  const code = (result: Result) => result.errors?.[0]?.extensions?.code ?? 'ok';
  const read = async (id: string, address: string) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...from(address) },
      body: JSON.stringify({ query: READ, variables: { id: globalId(id) } }),
    });
    return code((await response.json()) as Result);
  };
  const subscribe = (id: string, address: string) => {
    const client = createSseClient({ url, retryAttempts: 0, headers: from(address) });
    clients.push(client);
    return gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);
  };
  beforeAll(async () => {
    t = await startTestGateway({
      env: {
        RATE_LIMIT_REQUESTS_PER_SECOND: '1',
        RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '1',
        RATE_LIMIT_WINDOW_SECONDS: '6',
        UPSTREAM_CALL_BUDGET: '6',
        TRUST_PROXY: '1',
      },
    });
    url = await t.listen();
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) client.dispose();
    await until(() => t.subscriptions.open() === 0, 'closed');
  });
  afterAll(() => t.close());

  it('three addresses sharing a document: each change one read, data for all three, though the first spent its own window', async () => {
    const id = t.reference.store.headIds()[82]!;
    const streams = ['10.0.0.1', '10.0.0.2', '10.0.0.3'].map((address) => subscribe(id, address));
    await until(() => t.subscriptions.open() === 3, 'open');
    // The first subscriber spends the rest of its window (its subscription took one of six).
    const own = [];
    for (let i = 0; i < 6; i++) own.push(await read(id, '10.0.0.1'));
    expect(own.filter((c) => c === 'RATE_LIMITED').length).toBeGreaterThanOrEqual(1);
    t.reset();
    for (let sent = 1; sent <= 4; sent++) {
      t.headEvents.publish({ id });
      await until(() => streams.every((s) => s.results.length === sent), `event ${sent} at every subscriber`);
    }
    expect(streams.map((s) => s.results.map(code))).toEqual(Array(3).fill(Array(4).fill('ok')));
    // One read a change, for the three (they share a token, none, a document and variables).
    expect(t.calls('getHeadById')).toHaveLength(4);
  });

  it("other callers' writes do not spend a subscriber's window: the rest of its window is its own reads', beside eight events", async () => {
    const id = t.reference.store.headIds()[83]!;
    const s = subscribe(id, '10.0.1.1');
    await until(() => t.subscriptions.open() === 1, 'open');
    // Its subscription took one request of six; five reads (five upstream calls) of its own are left, whatever the
    // events cost.
    const own: string[] = [];
    for (let sent = 1; sent <= 8; sent++) {
      t.headEvents.publish({ id });
      await until(() => s.results.length === sent, `event ${sent}`);
      if (sent <= 5) own.push(await read(id, '10.0.1.1'));
    }
    expect(s.results.map(code)).toEqual(Array(8).fill('ok'));
    expect(own).toEqual(Array(5).fill('ok'));
  });

  it('an event is measured as an operation of its own, refused by nobody’s window', async () => {
    const id = t.reference.store.headIds()[84]!;
    const client = createSseClient({ url, retryAttempts: 0, headers: from('10.0.2.1') });
    clients.push(client);
    const s = gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);
    await until(() => t.subscriptions.open() === 1, 'open');
    const watchOk = 'gateway_operation_duration_seconds_count{operation="Watch",type="subscription",outcome="ok"}';
    const [refusedBefore, measuredBefore] = [
      sampleOf(await t.metrics.registry.metrics(), 'gateway_refusals_total{limit="requests"}') ?? 0,
      sampleOf(await t.metrics.registry.metrics(), watchOk) ?? 0,
    ];
    for (let sent = 1; sent <= 8; sent++) {
      t.headEvents.publish({ id });
      await until(() => s.results.length === sent, `event ${sent}`);
    }
    expect(sampleOf(await t.metrics.registry.metrics(), watchOk)).toBe(measuredBefore + 8);
    expect(sampleOf(await t.metrics.registry.metrics(), 'gateway_refusals_total{limit="requests"}') ?? 0).toBe(
      refusedBefore,
    );
  });
});

describe('SHED_MAX_IN_FLIGHT=1, TRUST_PROXY=1', () => {
  let t: TestGateway;
  let url: string;
  const inFlight = async () => sampleOf(await t.metrics.registry.metrics(), 'gateway_operations_in_flight');
  const read = async (id: string) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...from('10.0.3.1') },
      body: JSON.stringify({ query: READ, variables: { id: globalId(id) } }),
    });
    return (await response.json()) as Result;
  };
  beforeAll(async () => {
    t = await startTestGateway({ env: { SHED_MAX_IN_FLIGHT: '1', TRUST_PROXY: '1' } });
    url = await t.listen();
  });
  afterAll(() => t.close());

  it("counts an event in flight as the class 'events': a client's read is served beside it; an event while the gateway is overloaded is refused OVERLOADED first, the stream kept", async () => {
    const id = t.reference.store.headIds()[85]!;
    const client = createSseClient({ url, retryAttempts: 0, headers: from('10.0.3.1') });
    const s = gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);
    await until(() => t.subscriptions.open() === 1, 'open');
    expect(await inFlight()).toBe(0);

    // An event reading slowly holds the one unit, as no caller's: the subscriber's own read is served meanwhile.
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 300 }, 1);
    t.headEvents.publish({ id });
    await until(async () => (await inFlight()) === 1, 'the event in flight');
    expect((await read(id)).data).toBeDefined();
    await until(() => s.results.length === 1, 'the event');
    expect(s.results[0]!.data).toBeDefined();
    await until(async () => (await inFlight()) === 0, 'nothing in flight');

    // A client's read at the cap: an event meanwhile is refused, as an error event.
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 300 }, 1);
    const slow = read(id);
    await until(async () => (await inFlight()) === 1, 'the read in flight');
    t.headEvents.publish({ id });
    await until(() => s.results.length === 2, 'the refused event');
    expect(s.results[1]!.errors?.[0]?.extensions?.code).toBe('OVERLOADED');
    expect((await slow).data).toBeDefined();
    t.headEvents.publish({ id });
    await until(() => s.results.length === 3, 'the next event');
    expect(s.results[2]!.data).toBeDefined();
    expect(s.ended).toBe(false);
    client.dispose();
    await until(() => t.subscriptions.open() === 0, 'closed');
  });
});
