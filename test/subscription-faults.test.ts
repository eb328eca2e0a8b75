import { encodeGlobalID } from '@pothos/plugin-relay';
import type { ExecutionResult } from 'graphql';
import { type Client, createClient as createSseClient } from 'graphql-sse';
import { createClient as createWsClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { framings, partsBody } from '../src/server/answers/parts.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { gather } from './support/gather.js';
import { sampleOf } from './support/metrics.js';
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
    t = await startTestGateway({
      env: { SUBSCRIPTION_HEARTBEAT_MS: String(HEARTBEAT_MS), SUBSCRIPTIONS_MAX: '3', TRUST_PROXY: '1' },
    });
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(async () => {
    for (const client of clients) client.dispose();
    await t.close();
  });
  // Each subscriber a caller of its own (its own address): one caller is held to its share of the cap.
  let subscribers = 0;
  const subscribe = (id: string, authorization?: string) => {
    const address = { 'x-forwarded-for': `10.9.0.${++subscribers}` };
    const client = createSseClient({
      url,
      retryAttempts: 0,
      headers: authorization === undefined ? address : { ...address, authorization },
    });
    clients.push(client);
    return gather(client.iterate({ query: WATCH, variables: { id } }) as AsyncIterableIterator<Result>);
  };

  /**
   * What an idle stream of `accept` writes until `enough` of it has come (its heartbeats), then its client hangs up.
   */
  const idle = async (accept: string, enough: (text: string) => boolean, query = WATCH) => {
    const controller = new AbortController();
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body: JSON.stringify({ query, variables: { id: ids[70] } }),
      signal: controller.signal,
    });
    let text = '';
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      text += decoder.decode(chunk.value, { stream: true });
      if (enough(text)) break;
    }
    controller.abort();
    await until(() => t.subscriptions.open() === 0, 'closed');
    return text;
  };
  const count = (pattern: RegExp) => (text: string) => text.match(pattern)?.length ?? 0;
  const LIVE = 'query Live($id: ID!) @live { head(id: $id) { name } }';

  it('heartbeats on an idle stream of every framing: SSE comments, Apollo multipart {} parts, plain multipart padding, WebSocket pings', async () => {
    const comments = count(/^:\n\n/gm);
    expect(comments(await idle('text/event-stream', (text) => comments(text) >= 4))).toBeGreaterThanOrEqual(4);
    const empty = count(/\r\n\r\n\{\}\r\n--graphql/g);
    expect(
      empty(await idle('multipart/mixed;subscriptionSpec="1.0",application/json', (text) => empty(text) >= 3)),
    ).toBeGreaterThanOrEqual(3);
    // Plain multipart (urql's, Relay's): a space after the boundary, RFC 2046's transport padding.
    const padded = (text: string) => /--- {3}$/.test(text);
    expect(await idle('multipart/mixed', padded)).toMatch(/^\r\n--- {3}$/);
    // A live query's stream too, in Apollo's format and plain: its first result, then heartbeats.
    expect(
      empty(await idle('multipart/mixed;subscriptionSpec="1.0",application/json', (text) => empty(text) >= 3, LIVE)),
    ).toBeGreaterThanOrEqual(3);
    expect(await idle('multipart/mixed', padded, LIVE)).toMatch(/"head":\{"name":.*\r\n--- {3}$/s);
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
    expect(
      sampleOf(await t.metrics.registry.metrics(), 'gateway_refusals_total{limit="subscriptions"}'),
    ).toBeGreaterThanOrEqual(1);
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
