import { encodeGlobalID } from '@pothos/plugin-relay';
import type { ExecutionResult } from 'graphql';
import { createClient as createSseClient, type Client } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { framings, partsBody } from '../src/server/answers/parts.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { gather } from './support/gather.js';
import { until } from './support/until.js';

/*
 * Subscriptions under faults and limits: heartbeats on every transport, an upstream outage (an
 * error event, the stream kept), a token the upstream now refuses (UNAUTHENTICATED, the stream
 * ended), the per-process cap, and a client that reads nothing (cut once its buffer stays full).
 */

const HEARTBEAT_MS = 100;
const globalId = (id: string) => encodeGlobalID('Head', id);
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }';
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { head { name } } }';

type Result = ExecutionResult & { errors?: { extensions?: { code?: string } }[] };

describe(`SUBSCRIPTION_HEARTBEAT_MS=${HEARTBEAT_MS}, SUBSCRIPTIONS_MAX=3`, () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  const clients: Client[] = [];
  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBSCRIPTION_HEARTBEAT_MS: String(HEARTBEAT_MS), SUBSCRIPTIONS_MAX: '3' } });
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(async () => {
    for (const client of clients) client.dispose();
    await t.close();
  });
  const subscribe = (id: string, authorization?: string) => {
    const client = createSseClient({ url, retryAttempts: 0, headers: authorization === undefined ? {} : { authorization } });
    clients.push(client);
    return gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);
  };

  /** What an idle stream of `accept` writes in five heartbeats. */
  const idle = async (accept: string) => {
    const controller = new AbortController();
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept }, body: JSON.stringify({ query: WATCH, variables: { id: ids[70] } }), signal: controller.signal });
    let text = '';
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    setTimeout(() => controller.abort(), HEARTBEAT_MS * 5.5);
    try {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value, { stream: true });
    } catch {
      // aborted
    }
    await until(() => t.subscriptions.open() === 0, 'closed');
    return text;
  };

  it('heartbeats on an idle stream: SSE comments, Apollo multipart {} parts, WebSocket pings', async () => {
    expect((await idle('text/event-stream')).match(/^:\n\n/gm)!.length).toBeGreaterThanOrEqual(4);
    const multipart = await idle('multipart/mixed;subscriptionSpec="1.0",application/json');
    expect(multipart.match(/\r\n\r\n\{\}\r\n--graphql/g)!.length).toBeGreaterThanOrEqual(3);
    let pings = 0;
    const ws = createWsClient({
      url: url.replace(/^http/, 'ws'),
      retryAttempts: 0,
      webSocketImpl: class extends WebSocket {
        constructor(...args: ConstructorParameters<typeof WebSocket>) {
          super(...args);
          this.on('ping', () => pings++);
        }
      },
    });
    const iterator = ws.iterate({ query: WATCH, variables: { id: ids[70] } });
    void iterator.next();
    await until(() => pings >= 3, 'three pings', 5_000);
    await iterator.return?.();
    await ws.dispose();
    await until(() => t.subscriptions.open() === 0, 'the WebSocket subscription closed');
  });

  it('an upstream outage: an error event, the stream kept; the next change read again', async () => {
    const id = ids[71]!;
    const s = subscribe(id);
    await until(() => t.subscriptions.open() === 1, 'open');
    t.reference.injectFault('getHeadById', { kind: 'status', status: 503 }, 10);
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'During the outage' } });
    await until(() => s.results.length === 1, 'the error event');
    expect(s.results[0]!.errors?.[0]?.extensions?.code).toMatch(/^UPSTREAM_/);
    expect(s.ended).toBe(false);
    t.reference.clearFaults();
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'After the outage' } });
    await until(() => s.results.length === 2, 'the next event');
    expect(s.results[1]!.data).toEqual({ headChanged: { head: { name: 'After the outage' } } });
    await s.stop();
    await until(() => t.subscriptions.open() === 0, 'closed');
  });

  it('a token the upstream now refuses: its event says UNAUTHENTICATED and its stream ends', async () => {
    const id = ids[72]!;
    const s = subscribe(id, 'Bearer revoked-since');
    await until(() => t.subscriptions.open() === 1, 'open');
    t.reference.injectFault('getHeadById', { kind: 'status', status: 401, body: { detail: 'Not authenticated' } }, 1);
    await t.execute(UPDATE, { input: { id: globalId(id), name: 'Not for a revoked token' } });
    await until(() => s.ended, 'the stream ended');
    expect(s.results.map((result) => result.errors?.[0]?.extensions?.code)).toEqual(['UNAUTHENTICATED']);
    expect(sampleOf(await t.metrics.registry.metrics(), 'gateway_streams_cut_total{reason="unauthenticated"}')).toBe(1);
    expect(t.subscriptions.open()).toBe(0);
  });

  it('the per-process cap: a fourth subscription, of any caller, is refused SUBSCRIPTION_LIMIT', async () => {
    const open = [subscribe(ids[73]!, 'Bearer a'), subscribe(ids[74]!, 'Bearer b'), subscribe(ids[75]!, 'Bearer c')];
    await until(() => t.subscriptions.open() === 3, 'three open');
    const fourth = subscribe(ids[76]!, 'Bearer d');
    await until(() => fourth.ended, 'the fourth refused');
    expect(t.subscriptions.open()).toBe(3);
    expect(sampleOf(await t.metrics.registry.metrics(), 'gateway_refusals_total{limit="subscriptions"}')).toBeGreaterThanOrEqual(1);
    await Promise.all(open.map((s) => s.stop()));
    await until(() => t.subscriptions.open() === 0, 'closed');
  });
});

describe('a client that reads nothing', () => {
  it('is cut once its stream’s buffer has stayed full for three heartbeats, and its parts stopped', async () => {
    let stopped = false;
    let stalled = 0;
    const big = { data: { text: 'x'.repeat(10_000) } };
    const parts: AsyncIterableIterator<ExecutionResult> = {
      [Symbol.asyncIterator]: () => parts,
      next: () => Promise.resolve({ done: false, value: big }),
      return: () => {
        stopped = true;
        return Promise.resolve({ done: true, value: undefined });
      },
    };
    // Nobody reads the body: it fills to its high-water mark and stays there.
    const body = partsBody(parts, framings['text/event-stream'], { heartbeatMs: 20, onStalled: () => stalled++ });
    await until(() => body.destroyed, 'the stream cut', 2_000, 5);
    expect(stalled).toBe(1);
    expect(stopped).toBe(true);
  });
});

/*
 * An open subscription holds nothing of the limits, but each event it is sent is resolved as an
 * operation of its own, on its subscriber's behalf: charged to its caller's limits, counted in
 * flight, refused as an error event (the stream kept), logged and measured as any operation.
 */
describe("an event's resolution is an operation of its subscriber's", () => {
  /** A change of `id` told to its watchers, as a write through the gateway tells it. */
  const change = (t: TestGateway, id: string) => t.headEvents.publish({ id, at: Date.now() });
  const watcherReads = (t: TestGateway) => t.calls('getHeadById').filter((call) => call.headers.authorization === 'Bearer watcher').length;

  describe('RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND=1, RATE_LIMIT_WINDOW_SECONDS=5 (five calls a window)', () => {
    let t: TestGateway;
    let url: string;
    beforeAll(async () => {
      t = await startTestGateway({ env: { RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '1', RATE_LIMIT_WINDOW_SECONDS: '5', UPSTREAM_CALL_BUDGET: '5' } });
      url = await t.listen();
    });
    afterAll(() => t.close());

    it('charges each event its upstream reads; past the limit an event is RATE_LIMITED with no call, the stream kept, logged as the subscription’s', async () => {
      const id = t.reference.store.headIds()[80]!;
      const client = createSseClient({ url, retryAttempts: 0, headers: { authorization: 'Bearer watcher', 'x-request-id': 'watch-1' } });
      const s = gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);
      await until(() => t.subscriptions.open() === 1, 'open');
      t.reset();
      for (let sent = 1; sent <= 7; sent++) {
        change(t, id);
        await until(() => s.results.length === sent, `event ${sent}`);
      }
      const codes = s.results.map((result) => result.errors?.[0]?.extensions?.code ?? 'ok');
      const served = codes.filter((code) => code === 'ok').length;
      // What the window held went to reads, one an event; the rest refused before any call.
      expect(served).toBeGreaterThanOrEqual(1);
      expect(served).toBeLessThanOrEqual(5);
      expect(codes.slice(served)).toEqual(Array(7 - served).fill('RATE_LIMITED'));
      expect(s.results[served]!.errors![0]!.extensions).toMatchObject({ limit: 'upstream_calls' });
      expect(watcherReads(t)).toBe(served);
      expect(s.ended).toBe(false);
      // Each refused event is a failed operation's log line, under the subscription's request id.
      const refused = t.logLines.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line['msg'] === 'graphql operation' && line['requestId'] === 'watch-1' && line['outcome'] === 'refused');
      expect(refused).toHaveLength(7 - served);
      expect(refused[0]).toMatchObject({ operationName: 'Watch', operationType: 'subscription', errorCodes: ['RATE_LIMITED'], upstreamCalls: 0 });
      expect(sampleOf(await t.metrics.registry.metrics(), 'gateway_operation_duration_seconds_count{operation="Watch",type="subscription",outcome="ok"}')).toBe(served);
      client.dispose();
      await until(() => t.subscriptions.open() === 0, 'closed');
    });
  });

  describe('SHED_MAX_IN_FLIGHT=1', () => {
    let t: TestGateway;
    let url: string;
    const inFlight = async () => sampleOf(await t.metrics.registry.metrics(), 'gateway_operations_in_flight');
    // Over HTTP, from the subscriber's address: its token is made up, so it shares its address's share.
    const read = async (id: string) => {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer watcher' }, body: JSON.stringify({ query: 'query($id: ID!) { head(id: $id) { name } }', variables: { id: globalId(id) } }) });
      return (await response.json()) as { data?: { head: { name: string } | null }; errors?: { extensions?: { code?: string } }[] };
    };
    beforeAll(async () => {
      t = await startTestGateway({ env: { SHED_MAX_IN_FLIGHT: '1' } });
      url = await t.listen();
    });
    afterAll(() => t.close());

    it('counts an event in flight while it reads, for its caller; an event while its caller holds its share is refused OVERLOADED, the stream kept', async () => {
      const id = t.reference.store.headIds()[81]!;
      const client = createSseClient({ url, retryAttempts: 0, headers: { authorization: 'Bearer watcher' } });
      const s = gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);
      await until(() => t.subscriptions.open() === 1, 'open');
      // The open stream holds nothing.
      expect(await inFlight()).toBe(0);

      // An event reading slowly is the caller's operation in flight: its own read is refused meanwhile.
      t.reference.injectFault('getHeadById', { kind: 'latency', ms: 300 }, 1);
      change(t, id);
      await until(async () => (await inFlight()) === 1, 'the event in flight');
      expect((await read(id)).errors?.[0]?.extensions?.code).toBe('OVERLOADED');
      await until(() => s.results.length === 1, 'the event');
      expect(s.results[0]!.data).toBeDefined();
      await until(async () => (await inFlight()) === 0, 'nothing in flight');

      // A read of the caller's in flight: an event meanwhile is refused, as an error event.
      t.reference.injectFault('getHeadById', { kind: 'latency', ms: 300 }, 1);
      const slow = read(id);
      await until(async () => (await inFlight()) === 1, 'the read in flight');
      change(t, id);
      await until(() => s.results.length === 2, 'the refused event');
      expect(s.results[1]!.errors?.[0]?.extensions?.code).toBe('OVERLOADED');
      expect((await slow).data?.head).not.toBeNull();
      change(t, id);
      await until(() => s.results.length === 3, 'the next event');
      expect(s.results[2]!.data).toBeDefined();
      expect(s.ended).toBe(false);
      client.dispose();
      await until(() => t.subscriptions.open() === 0, 'closed');
    });
  });
});
