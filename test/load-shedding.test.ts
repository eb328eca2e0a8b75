import type { ExecutionResult } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OperationState, RequestState } from '../src/server/request-state.js';
import { useInFlight } from '../src/server/traffic/in-flight.js';
import { LoadShedder } from '../src/server/traffic/load-shedder.js';
import { answer, jsonHeaders, post, startTestGateway, type Answer, type TestGateway } from './support/gateway.js';
import { ok, refusals } from './support/limits.js';
import { sampleOf } from './support/metrics.js';
import { until } from './support/until.js';

/*
 * Load shedding (server/traffic/load-shedder.ts, traffic/load-shedding.ts): over the in-flight cap, or
 * while the event loop lags, a new operation is refused at once with 503, Retry-After and
 * OVERLOADED, and makes no upstream call; probes and the operations already running go on.
 * Operations are held at the reference upstream by a latency fault and released by the test, so
 * nothing here waits on a guess of how long something takes.
 */

/** One Get Heads call at the upstream (listHeads). */
const oneCall = '{ heads(first: 1) { nodes { uuid name } } }';

const scrape = async (t: TestGateway) => (await t.gateway.fetch('http://gateway/metrics')).text();
const inFlight = async (t: TestGateway) => sampleOf(await scrape(t), 'gateway_operations_in_flight');

/** The refusal the issue asks for: 503, Retry-After, OVERLOADED, no data. */
function expectOverloaded(a: Answer): void {
  expect(a.status, JSON.stringify(a.body)).toBe(503);
  expect(a.headers.get('retry-after')).toBe('1');
  expect(a.body.data).toBeUndefined();
  expect(a.body.errors).toEqual([{ message: 'The gateway is overloaded: try again in 1 s.', extensions: { code: 'OVERLOADED', retryAfterSeconds: 1 } }]);
}

describe('load shedding with the defaults', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('counts an operation in flight while it waits on the upstream and gives it back once answered', async () => {
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    const held = post(t, { query: oneCall });
    await until(() => t.reference.inFlight() === 1, 'the listing held at the upstream');
    expect(await inFlight(t)).toBe(1);
    expect(t.reference.releaseHeld()).toBe(1);
    expect(ok(await held)).toBe(true);
    expect(await inFlight(t)).toBe(0);
    expect(sampleOf(await scrape(t), 'gateway_shedding_event_loop_delay_seconds')).toBeGreaterThanOrEqual(0);
    expect(await refusals(t, 'overloaded')).toBe(0);
  });
});

describe('SHED_MAX_IN_FLIGHT=2', () => {
  let t: TestGateway;
  let url: string;
  beforeAll(async () => {
    // The event loop is not watched here: only the cap refuses. Identical operations held at the
    // upstream are counted by its calls: they would share one (UPSTREAM_DEDUPE). One client
    // address for every request, over HTTP and through yoga.fetch alike (TRUST_PROXY): one caller.
    t = await startTestGateway({ env: { SHED_MAX_IN_FLIGHT: '2', SHED_EVENT_LOOP_DELAY_MS: '0', UPSTREAM_DEDUPE: 'false', TRUST_PROXY: 'true' } });
    url = await t.listen();
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  const oneCaller = { 'x-forwarded-for': '203.0.113.20' };
  const send = async (body: string, headers: Record<string, string> = {}) => answer(await fetch(url, { method: 'POST', headers: { ...jsonHeaders(), ...oneCaller, ...headers }, body }));

  it('refuses the caller that holds the cap a new operation before any work, answers probes, finishes the running ones, and takes new ones once they are done', async () => {
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 2);
    const running = [send(JSON.stringify({ query: oneCall })), send(JSON.stringify({ query: oneCall }))];
    await until(() => t.reference.inFlight() === 2, 'two listings held at the upstream');
    const refusedBefore = await refusals(t, 'overloaded');

    // Over HTTP, refused by the server before yoga: not even a body that would not parse is read.
    expectOverloaded(await send(JSON.stringify({ query: oneCall })));
    expectOverloaded(await send('{ not json'));
    // A browser's request goes through yoga (for its CORS headers): refused there the same way.
    expectOverloaded(await send(JSON.stringify({ query: oneCall }), { origin: 'http://elsewhere.example' }));
    // Through yoga.fetch, a single operation and a batch.
    expectOverloaded(await post(t, { query: oneCall }, oneCaller));
    const batch = await post(t, [{ query: oneCall }, { query: oneCall }], oneCaller);
    expect(batch.status).toBe(503);
    expect(t.calls('listHeads')).toHaveLength(2);
    expect(await refusals(t, 'overloaded')).toBe(refusedBefore + 5);

    // Probes are answered while new operations are refused, on the public port.
    const probe = (path: string) => fetch(new URL(path, url));
    expect((await probe('/health')).status).toBe(200);
    expect((await probe('/ready')).status).toBe(200);
    const metrics = await (await probe('/metrics')).text();
    expect(sampleOf(metrics, 'gateway_operations_in_flight')).toBe(2);

    // The running operations finish with their data.
    expect(t.reference.releaseHeld()).toBe(2);
    const heads = t.reference.store.headIds();
    for (const a of await Promise.all(running)) {
      expect(ok(a)).toBe(true);
      expect(heads).toContain((a.body.data as { heads: { nodes: { uuid: string }[] } }).heads.nodes[0]!.uuid);
    }

    // Load has fallen: new operations are taken again.
    expect(await inFlight(t)).toBe(0);
    expect(ok(await send(JSON.stringify({ query: oneCall })))).toBe(true);
    expect(ok(await post(t, { query: oneCall }, oneCaller))).toBe(true);
  });

  it("counts each of a batch's operations: a batch of two fills the cap", async () => {
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    // The batch's operations share its loaders: one listing, held, for both.
    const batch = post(t, [{ query: oneCall }, { query: oneCall }]);
    await until(() => t.reference.inFlight() === 1, "the batch's listing held at the upstream");
    expect(await inFlight(t)).toBe(2);
    expectOverloaded(await post(t, { query: '{ __typename }' }));
    t.reference.releaseHeld();
    const answered = await batch;
    expect(answered.status).toBe(200);
    expect(answered.body).toHaveLength(2);
    expect(await inFlight(t)).toBe(0);
  });

  it('holds an @defer operation in flight until its last part is out', async () => {
    // Get Head By Id for the first part; Get Head Ext By Id, held, for the deferred fields.
    const id = t.reference.store.headIds()[0]!;
    t.reference.injectFault('getHeadExtById', { kind: 'latency', ms: 600_000 });
    const deferred = await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
      body: JSON.stringify({ query: 'query($id: ID!) { head(id: $id) { name ... @defer { headMetadata } } }', variables: { id } }),
    });
    // The response is out (its first part with it); the deferred read is still held.
    expect(deferred.headers.get('content-type')).toMatch(/^multipart\/mixed/);
    await until(() => t.reference.inFlight() === 1, 'the deferred read held at the upstream');
    expect(await inFlight(t)).toBe(1);
    t.reference.releaseHeld();
    expect(await deferred.text()).toContain('headMetadata');
    await until(async () => (await inFlight(t)) === 0, 'the stream given back once its last part is out');
  });
});

describe('SHED_EVENT_LOOP_DELAY_MS=50', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ env: { SHED_EVENT_LOOP_DELAY_MS: '50', SHED_MAX_IN_FLIGHT: '0' } });
  });
  afterAll(() => t.close());

  /** Holds this process's event loop, which the gateway shares, for `ms`. */
  const hold = (ms: number) => {
    const until = performance.now() + ms;
    while (performance.now() < until);
  };
  const delay = async () => sampleOf(await scrape(t), 'gateway_shedding_event_loop_delay_seconds') ?? 0;

  it('refuses new operations while the loop lags, makes no upstream call for them, and takes them again once it keeps up', async () => {
    // The loop held 200 ms at each turn: every delay of the window is long, not one pause.
    await until(
      async () => {
        hold(200);
        return (await delay()) > 0.05;
      },
      'a lagging window',
      20_000,
    );
    // Only promise jobs since the gauge was read: the next window has not been sampled yet.
    t.reset();
    expectOverloaded(await post(t, { query: oneCall }));
    expect(t.calls('listHeads')).toHaveLength(0);
    expect((await t.gateway.fetch('http://gateway/health')).status).toBe(200);
    expect(await refusals(t, 'overloaded')).toBeGreaterThan(0);

    await until(async () => (await delay()) < 0.05, 'a window without lag', 20_000);
    expect(ok(await post(t, { query: oneCall }))).toBe(true);
  });
});

describe('a stream whose next() rejects', () => {
  it("gives back its unit in flight and its caller's in-flight slot, though its consumer never cancels it", async () => {
    // The plugin's own hooks, in yoga's order, around a stream that fails after its first part: a
    // consumer that follows the streams spec (an errored stream is not cancelled) never calls its
    // return(). (yoga's result processors on @whatwg-node/node-fetch's streams happen to.)
    const shedder = new LoadShedder({ maxInFlight: 1, eventLoopDelayMs: 0, maxUpstreamQueued: 0, retryAfterSeconds: 1 }, { trustProxy: false, queuedCalls: () => 0, onRefused: () => undefined });
    try {
      const slotsBack: string[] = [];
      const plugin = useInFlight(shedder, (caller) => slotsBack.push(caller));
      const request = new RequestState(new Request('http://gateway/graphql', { method: 'POST', headers: { authorization: 'Bearer streaming' } }));
      const operation = new OperationState();
      request.operations.push(operation);
      const context = { requestState: request, operationState: operation };
      const refused = { response: undefined as Response | undefined };
      plugin.onRequest!({ serverContext: context, fetchAPI: { Response }, endResponse: (response: Response) => (refused.response = response) } as never);
      plugin.onParams!({ context } as never);
      // What the caller limits' admission does with RATE_LIMIT_IN_FLIGHT.
      operation.slot = request.caller!.key;
      async function* parts(): AsyncGenerator<ExecutionResult> {
        yield { data: { first: true } };
        throw new Error('a part failed');
      }
      let stream: AsyncIterable<ExecutionResult> = parts();
      plugin.onExecutionResult!({ result: stream, setResult: (wrapped: AsyncIterable<ExecutionResult>) => (stream = wrapped), context } as never);
      plugin.onResponse!({ serverContext: context } as never);
      expect([refused.response, shedder.inFlight, slotsBack]).toEqual([undefined, 1, []]);

      const iterator = stream[Symbol.asyncIterator]();
      expect(await iterator.next()).toEqual({ done: false, value: { data: { first: true } } });
      await expect(iterator.next()).rejects.toThrow('a part failed');
      expect(shedder.inFlight).toBe(0);
      expect(slotsBack).toEqual([request.caller!.key]);
      // Its caller's share is back too: the cap of one takes it again.
      expect(shedder.admit(request.caller!)).toBe(true);
    } finally {
      shedder.close();
    }
  });
});
