import { encodeGlobalID } from '@pothos/plugin-relay';
import type { ExecutionResult } from 'graphql';
import { type Client, createClient } from 'graphql-sse';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { gather } from './support/gather.js';
import { until } from './support/until.js';

/*
 * What one caller can make real time do is bounded (server/real-time/ledger.ts, event-resolutions.ts):
 * the heads its subscriptions and live queries watch, its share of the process's subscriptions, and
 * how many events the process resolves at once, one caller's among them. Callers told apart by
 * address (TRUST_PROXY, X-Forwarded-For), over real HTTP.
 */

const globalId = (id: string) => encodeGlobalID('Head', id);
const WATCH = 'subscription Watch($id: ID!) { headChanged(id: $id) { head { name } } }';
const UPDATE = 'mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }';
type Result = ExecutionResult & { errors?: { extensions?: { code?: string } }[] };
const code = (result: Result | undefined) => result?.errors?.[0]?.extensions?.code;

/**
 * What refused a stream before it began: graphql-sse's client throws with the answer (429, its error's code in the
 * body).
 */
async function refusal(s: { failure: Promise<unknown> }): Promise<string | undefined> {
  const response = ((await s.failure) as { response?: Response } | undefined)?.response;
  if (response === undefined) return undefined;
  return `${response.status} ${/"code":"([A-Z_]+)"/.exec(await response.text())?.[1]}`;
}

function harness(env: Record<string, string>) {
  const state = { t: undefined as unknown as TestGateway, url: '' };
  const clients: Client[] = [];
  beforeAll(async () => {
    state.t = await startTestGateway({ env: { TRUST_PROXY: '1', ...env } });
    state.url = await state.t.listen();
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) client.dispose();
    await until(() => state.t.subscriptions.open() === 0, 'every stream closed');
  });
  afterAll(() => state.t.close());
  const stream = (query: string, variables: Record<string, unknown>, headers: Record<string, string>) => {
    const client = createClient({ url: state.url, retryAttempts: 0, headers });
    clients.push(client);
    return gather(client.iterate({ query, variables }) as AsyncIterableIterator<Result>);
  };
  return { state, stream };
}

describe('SUBSCRIPTION_WATCHED_HEADS_PER_CALLER=5, SUBSCRIPTION_LIVE_THROTTLE_MS=0', () => {
  const { state, stream } = harness({ SUBSCRIPTION_WATCHED_HEADS_PER_CALLER: '5', SUBSCRIPTION_LIVE_THROTTLE_MS: '0' });
  const from = { 'x-forwarded-for': '10.1.0.1' };

  it('a live query watching three heads and two subscriptions fill a caller’s five: its next subscription is refused SUBSCRIPTION_LIMIT, another caller’s is not', async () => {
    const { t } = state;
    const ids = t.reference.store.headIds();
    const page = stream('query Page @live { heads(first: 3) { nodes { id } } }', {}, from);
    await until(() => page.results.length === 1, 'the first page');
    const subscriptions = [stream(WATCH, { id: ids[10] }, from), stream(WATCH, { id: ids[11] }, from)];
    await until(() => t.subscriptions.open() === 3, 'three open');
    const refused = stream(WATCH, { id: ids[12] }, from);
    expect(await refusal(refused)).toBe('429 SUBSCRIPTION_LIMIT');
    const other = stream(WATCH, { id: ids[12] }, { 'x-forwarded-for': '10.1.0.2' });
    await until(() => t.subscriptions.open() === 4, 'another caller’s open');
    expect(other.ended).toBe(false);
    expect(subscriptions.every((s) => !s.ended)).toBe(true);
  });

  it('a live query whose re-run reads more heads than its caller may watch says SUBSCRIPTION_LIMIT, and ends', async () => {
    const { t } = state;
    const ids = t.reference.store.headIds();
    const rename = async (id: string, name: string) =>
      expect((await t.execute(UPDATE, { input: { id: globalId(id), name } })).errors).toBeUndefined();
    for (const [i, letter] of ['A', 'B', 'C', 'D', 'E'].entries()) await rename(ids[60 + i]!, `Bounded ${letter}`);
    const page = stream('query Found @live { heads(first: 10, search: "Bounded") { nodes { name } } }', {}, from);
    await until(() => page.results.length === 1, 'the first result: five heads, the whole share');
    // A sixth head to list, not watched (no re-run); then a change to a watched one: its re-run reads six.
    await rename(ids[65]!, 'Bounded F');
    await rename(ids[60]!, 'Bounded A, again');
    await until(() => page.ended, 'the live query ended');
    expect(page.results.map(code)).toEqual([undefined, 'SUBSCRIPTION_LIMIT']);
  });
});

describe('SUBSCRIPTIONS_MAX=8, SUBSCRIPTIONS_PER_CALLER=8', () => {
  const { state, stream } = harness({ SUBSCRIPTIONS_MAX: '8', SUBSCRIPTIONS_PER_CALLER: '8' });

  it('one caller cannot take the whole process: past half, it is held to its share, and another caller still subscribes', async () => {
    const { t } = state;
    const ids = t.reference.store.headIds();
    const a = { 'x-forwarded-for': '10.2.0.1' };
    const taken = [];
    for (let i = 0; i < 8; i++) {
      const s = stream(WATCH, { id: ids[30 + i] }, a);
      await until(() => t.subscriptions.open() === taken.length + 1 || s.ended, `subscription ${i + 1} answered`);
      if (s.ended) {
        expect(await refusal(s)).toBe('429 SUBSCRIPTION_LIMIT');
        break;
      }
      taken.push(s);
    }
    expect(taken.length).toBeGreaterThanOrEqual(4);
    expect(taken.length).toBeLessThan(8);
    const b = stream(WATCH, { id: ids[40] }, { 'x-forwarded-for': '10.2.0.2' });
    await until(() => t.subscriptions.open() === taken.length + 1, 'the other caller’s subscription open');
    expect(b.ended).toBe(false);
  });
});

describe('SUBSCRIPTION_EVENT_CONCURRENCY=2, SUBSCRIPTION_EVENT_CONCURRENCY_PER_CALLER=1', () => {
  const { state, stream } = harness({
    SUBSCRIPTION_EVENT_CONCURRENCY: '2',
    SUBSCRIPTION_EVENT_CONCURRENCY_PER_CALLER: '1',
  });

  it('a write told to ten callers’ subscribers: their events resolved two at a time, every one sent', async () => {
    const { t } = state;
    const id = t.reference.store.headIds()[50]!;
    // Ten callers, each its own token (made up: the read needs none): ten sharing keys, ten reads.
    const subscribers = Array.from({ length: 10 }, (_, i) =>
      stream(WATCH, { id }, { 'x-forwarded-for': `10.3.0.${i + 1}`, authorization: `Bearer caller-${i}` }),
    );
    await until(() => t.subscriptions.open() === 10, 'ten open');
    t.reset();
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 100 }, 10);
    expect((await t.execute(UPDATE, { input: { id: globalId(id), name: 'Told to ten' } })).errors).toBeUndefined();
    await until(() => subscribers.every((s) => s.results.length === 1), 'every event', 10_000);
    expect(t.calls('getHeadById')).toHaveLength(10);
    expect(t.reference.maxInFlight()).toBeLessThanOrEqual(2);
    expect(subscribers.map((s) => s.results[0]?.data)).toEqual(
      Array(10).fill({ headChanged: { head: { name: 'Told to ten' } } }),
    );
  });

  it('a burst of changes to one head while its event waits for its turn: one read for them all', async () => {
    const { t } = state;
    const id = t.reference.store.headIds()[51]!;
    const busy = t.reference.store.headIds()[52]!;
    const s = stream(WATCH, { id }, { 'x-forwarded-for': '10.4.0.1' });
    // Two slow events of other callers take both turns.
    const others = [1, 2].map((n) =>
      stream(WATCH, { id: busy }, { 'x-forwarded-for': `10.4.0.${n + 1}`, authorization: `Bearer busy-${n}` }),
    );
    await until(() => t.subscriptions.open() === 3, 'open');
    t.reset();
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 300 }, 2);
    t.headEvents.publish({ id: busy });
    await until(() => t.reference.inFlight() === 2, 'both turns taken');
    for (let i = 0; i < 10; i++) t.headEvents.publish({ id });
    await until(() => s.results.length >= 1 && others.every((o) => o.results.length === 1), 'the events', 5_000);
    expect(t.calls('getHeadById').filter((call) => call.path.endsWith(`/${id}`))).toHaveLength(1);
  });
});
