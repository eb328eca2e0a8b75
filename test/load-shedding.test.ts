import { createServer } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { type ExecutionResult, GraphQLError } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { ALICE_PASSWORD, ALICE_USERNAME, DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { useAnswerBody } from '../src/server/answers/answer.js';
import type { OperationState } from '../src/server/operation-state.js';
import type { Policy, Serve } from '../src/server/pipeline/stages.js';
import { useCallerLimits } from '../src/server/traffic/caller-limits.js';
import { useInFlight } from '../src/server/traffic/in-flight.js';
import { createCallerLimiters, take, waitOf } from '../src/server/traffic/limiters.js';
import { LoadShedder } from '../src/server/traffic/load-shedder.js';
import { fetchTransport } from '../src/server/transports/fetch.js';
import { nodeTransport } from '../src/server/transports/node.js';
import { type Answer, answer, jsonHeaders, post, startTestGateway, type TestGateway } from './support/gateway.js';
import { ok, refusals } from './support/limits.js';
import { sampleOf } from './support/metrics.js';
import { oneOperation, serveOf } from './support/pipeline.js';
import { until } from './support/until.js';

/*
 * Load shedding (server/traffic/load-shedder.ts, traffic/in-flight.ts): over the in-flight cap, or
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
  expect(a.body.errors).toEqual([
    {
      message: 'The gateway is overloaded: try again in 1 s.',
      extensions: { code: 'OVERLOADED', retryAfterSeconds: 1 },
    },
  ]);
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

describe('users behind one address (SHED_MAX_IN_FLIGHT=4, over HTTP from one address)', () => {
  let t: TestGateway;
  let url: string;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { SHED_MAX_IN_FLIGHT: '4', SHED_EVENT_LOOP_DELAY_MS: '0', UPSTREAM_DEDUPE: 'false' },
    });
    url = await t.listen();
  });
  afterAll(() => t.close());

  const send = async (query: string, authorization?: string, variables?: Record<string, unknown>) =>
    answer(
      await fetch(url, {
        method: 'POST',
        headers: { ...jsonHeaders(), ...(authorization === undefined ? {} : { authorization }) },
        body: JSON.stringify({ query, variables }),
      }),
    );
  const login = `mutation($input: LoginInput!) { login(input: $input) { accessToken } }`;

  it('each keep their share once their token is known to be real (issued by login, or accepted by Get Permissions); made-up tokens share the address’s', async () => {
    // Two tokens the gateway's login issued, to two accounts (each its caller); two the upstream issued and then
    // accepted (each read its permissions through the gateway).
    const issued = [];
    for (const input of [DEMO_CREDENTIALS, { username: ALICE_USERNAME, password: ALICE_PASSWORD }])
      issued.push(
        `Bearer ${((await send(login, undefined, { input })).body.data as { login: { accessToken: string } }).login.accessToken}`,
      );
    const accepted = [0, 1].map(
      () => `Bearer ${t.reference.store.login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)!}`,
    );
    for (const token of accepted) expect(ok(await send('{ permissions(first: 1) { totalCount } }', token))).toBe(true);
    const [holder, ...others] = [...issued, ...accepted] as [string, ...string[]];

    // One of them holds the whole cap with slow reads.
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 4);
    const held = Array.from({ length: 4 }, () => send(oneCall, holder));
    await until(() => t.reference.inFlight() === 4, 'four listings held at the upstream');
    const id = t.reference.store.headIds()[0]!;
    const read = 'query($id: ID!) { head(id: $id) { name } }';
    // The others, from the same address: each judged by its own share (none in flight), served.
    for (const token of others) expect(ok(await send(read, token, { id }))).toBe(true);
    // A made-up token, and no token: the address's share, which the holder's reads hold.
    expectOverloaded(await send(read, 'Bearer made-up', { id }));
    expectOverloaded(await send(read, undefined, { id }));
    expect(t.reference.releaseHeld()).toBe(4);
    for (const a of await Promise.all(held)) expect(ok(a)).toBe(true);
  });
});

describe('half-sent bodies (SHED_MAX_IN_FLIGHT=4)', () => {
  let t: TestGateway;
  let url: URL;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    t = await startTestGateway({ env: { SHED_MAX_IN_FLIGHT: '4', SHED_EVENT_LOOP_DELAY_MS: '0' } });
    url = new URL(await t.listen());
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await t.close();
  });

  /** A connection from `address` that sends a chunked POST's head and five bytes of its body, then nothing. */
  const halfSent = (address: string) =>
    new Promise<void>((resolve, reject) => {
      const socket = connect({ host: url.hostname, port: Number(url.port), localAddress: address }, () => {
        socket.write(
          `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"que\r\n`,
          () => resolve(),
        );
      });
      socket.on('error', reject);
      sockets.push(socket);
    });

  it('hold no place in flight: 40 of them from four addresses, and every other caller is still served', async () => {
    for (let i = 0; i < 40; i++) await halfSent(`127.0.0.${2 + (i % 4)}`);
    // Each has reached the gateway, its head read (a request made, its body awaited).
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await inFlight(t)).toBe(0);
    for (const authorization of [undefined, 'Bearer innocent']) {
      const read = answer(
        await fetch(url, {
          method: 'POST',
          headers: { ...jsonHeaders(), ...(authorization === undefined ? {} : { authorization }) },
          body: JSON.stringify({ query: oneCall }),
        }),
      );
      expect((await read).status).toBe(200);
    }
    expect(await refusals(t, 'overloaded')).toBe(0);
  });
});

describe('SHED_MAX_IN_FLIGHT=2', () => {
  let t: TestGateway;
  let url: string;
  beforeAll(async () => {
    // The event loop is not watched here: only the cap refuses. Identical operations held at the
    // upstream are counted by its calls: they would share one (UPSTREAM_DEDUPE). One client
    // address for every request, over HTTP and through the fetch transport alike (TRUST_PROXY): one caller.
    t = await startTestGateway({
      env: { SHED_MAX_IN_FLIGHT: '2', SHED_EVENT_LOOP_DELAY_MS: '0', UPSTREAM_DEDUPE: 'false', TRUST_PROXY: 'true' },
    });
    url = await t.listen();
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  const oneCaller = { 'x-forwarded-for': '203.0.113.20' };
  const send = async (body: string, headers: Record<string, string> = {}) =>
    answer(await fetch(url, { method: 'POST', headers: { ...jsonHeaders(), ...oneCaller, ...headers }, body }));

  it('an OVERLOADED answer carries its x-request-id, and the refusals are logged: one line per reason a second, with their count and the last one’s id', async () => {
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 2);
    const running = [send(JSON.stringify({ query: oneCall })), send(JSON.stringify({ query: oneCall }))];
    await until(() => t.reference.inFlight() === 2, 'two listings held at the upstream');
    t.logLines.length = 0;
    const refused = [];
    for (let i = 0; i < 3; i++)
      refused.push(await send(JSON.stringify({ query: oneCall }), { 'x-request-id': `shed-${i}` }));
    for (const [i, a] of refused.entries()) {
      expectOverloaded(a);
      expect(a.headers.get('x-request-id')).toBe(`shed-${i}`);
    }
    const lines = () =>
      t.logLines
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.msg === 'operations refused: the gateway is overloaded');
    await until(() => lines().length > 0, 'the refusals logged');
    // One line (pino's warn is 40) for the three, and for any refusal of a test before this one still in its second.
    expect(lines()).toEqual([expect.objectContaining({ level: 40, reason: 'caller_share', requestId: 'shed-2' })]);
    expect(lines()[0]!.refused).toBeGreaterThanOrEqual(3);
    t.reference.releaseHeld();
    await Promise.all(running);
  });

  it('refuses the caller that holds the cap a new operation before any work, answers probes, finishes the running ones, and takes new ones once they are done', async () => {
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 2);
    const running = [send(JSON.stringify({ query: oneCall })), send(JSON.stringify({ query: oneCall }))];
    await until(() => t.reference.inFlight() === 2, 'two listings held at the upstream');
    const refusedBefore = await refusals(t, 'overloaded');

    // Over HTTP, refused at the intake's first step: not even a body that would not parse is read.
    expectOverloaded(await send(JSON.stringify({ query: oneCall })));
    expectOverloaded(await send('{ not json'));
    // A browser's request, the same way.
    expectOverloaded(await send(JSON.stringify({ query: oneCall }), { origin: 'http://elsewhere.example' }));
    // Through the test helper (over a socket too), a single operation and a batch.
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
      body: JSON.stringify({
        query: 'query($id: ID!) { head(id: $id) { name ... @defer { headMetadata } } }',
        variables: { id },
      }),
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
  /**
   * The one path with the steps that count a request in flight (the shedder's, RATE_LIMIT_IN_FLIGHT's),
   * both at one, around an executor whose parts fail after the first, once `fail` is called: what
   * it serves, and the operation it streamed.
   */
  function failingStream() {
    const config = loadConfig({ SHED_MAX_IN_FLIGHT: '1', SHED_EVENT_LOOP_DELAY_MS: '0', RATE_LIMIT_IN_FLIGHT: '1' });
    const shedder = new LoadShedder(config.loadShedding, { queuedCalls: () => 0, onRefused: () => undefined });
    const limiters = createCallerLimiters(config.callerLimits, { inFlightTtlSeconds: 60 });
    const inFlight = useInFlight(shedder);
    const callerLimits = useCallerLimits({ limiters });
    const streamed: OperationState[] = [];
    let fail!: () => void;
    const failing = new Promise<void>((resolve) => (fail = resolve));
    async function* parts(): AsyncGenerator<ExecutionResult> {
      yield { data: { first: true } };
      await failing;
      throw new Error('a part failed');
    }
    const policies: Policy[] = [
      useAnswerBody({ maxBytes: 1_000_000, stream: { heartbeatMs: 8_000 } }),
      inFlight,
      oneOperation('{ first }'),
      callerLimits!,
      {
        name: 'execution',
        execution: (operation) => {
          streamed.push(operation);
          return parts();
        },
      },
    ];
    const serve = serveOf({ policies, mask: () => new GraphQLError('Unexpected error.') });
    return { shedder, inFlightSlots: limiters.inFlight!, serve, streamed, fail };
  }

  /** Each transport's request for the stream, and what its client reads once the stream failed. */
  const transports: Record<
    string,
    { failure: string; send(serve: Serve, init: RequestInit): Promise<{ response: Response; close(): Promise<void> }> }
  > = {
    fetch: {
      failure: 'a part failed',
      send: async (serve, init) => ({
        response: await fetchTransport(serve)('http://gateway/graphql', init),
        close: async () => undefined,
      }),
    },
    // Over a real port the client sees the response cut.
    HTTP: {
      failure: 'terminated',
      async send(serve, init) {
        const server = createServer(nodeTransport(serve));
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`, init);
        return {
          response,
          close: () => new Promise<void>((resolve) => server.close(() => resolve()).closeAllConnections()),
        };
      },
    },
  };

  /** The first chunks of a body until `text` is among them: what a client reading the stream has seen. */
  async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, text: string): Promise<string> {
    const decoder = new TextDecoder();
    let seen = '';
    while (!seen.includes(text)) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`the body ended before ${text}`);
      seen += decoder.decode(value, { stream: true });
    }
    return seen;
  }

  it.each(Object.keys(transports))(
    "gives back its unit in flight and its caller's in-flight slot, though its consumer never cancels it (the %s transport)",
    async (name) => {
      // A consumer that follows the streams spec (an errored stream is not cancelled) never calls the
      // parts' return(): what gives the counts back is the telemetry stage, which the transport runs
      // once the body has failed.
      const transport = transports[name]!;
      const { shedder, inFlightSlots, serve, streamed, fail } = failingStream();
      const { response, close } = await transport.send(serve, {
        method: 'POST',
        headers: { accept: 'multipart/mixed', authorization: 'Bearer streaming' },
      });
      try {
        expect([response.status, response.headers.get('content-type')]).toEqual([200, 'multipart/mixed; boundary="-"']);
        const reader = response.body!.getReader();
        expect(await readUntil(reader, '{"data":{"first":true}}')).toContain('Content-Type: application/json');
        const [operation] = streamed;
        const caller = operation!.request.caller;
        // Its first part is out: its unit and its caller's slot are held until its last.
        expect([shedder.inFlight, operation!.slot]).toEqual([1, caller.key]);

        fail();
        await expect(reader.read()).rejects.toThrow(transport.failure);
        expect(shedder.inFlight).toBe(0);
        expect(operation!.slot).toBeUndefined();
        // Its caller's slot is back in the limiter: the limit of one takes it again.
        expect(waitOf(inFlightSlots, await take(inFlightSlots, caller.key, 1))).toBeUndefined();
        // Its caller's share is back too: the cap of one takes it again.
        expect(shedder.admit(caller)).toBe(true);
      } finally {
        // A test that failed early leaves no part waiting.
        fail();
        await close();
        shedder.close();
      }
    },
  );
});

describe('UPSTREAM_CONNECTIONS=1, SHED_MAX_UPSTREAM_QUEUED=2, SUBSCRIPTION_POLL_CONCURRENCY=4: a queue that is no operation’s', () => {
  let t: TestGateway;
  let url: string;
  beforeAll(async () => {
    t = await startTestGateway({
      env: {
        UPSTREAM_CONNECTIONS: '1',
        SHED_MAX_UPSTREAM_QUEUED: '2',
        SUBSCRIPTION_POLL_CONCURRENCY: '4',
        SHED_EVENT_LOOP_DELAY_MS: '0',
      },
    });
    url = await t.listen();
  });
  afterAll(() => t.close());

  it('polling’s reads queued for the one connection, nothing in flight: a caller holding nothing is served, not refused for the queue', async () => {
    t.reference.injectFault('getHeadExt', { kind: 'latency', ms: 600_000 }, 4);
    const ids = t.reference.store.headIds().slice(0, 4);
    const watchers = ids.map((id) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'subscription($id: ID!) { headChanged(id: $id) { id } }', variables: { id } }),
      }),
    );
    // Each head's baseline read: one held on the connection, the others queued behind it.
    await until(() => t.reference.inFlight() === 1 && t.upstream.queuedCalls() >= 2, 'the pool’s queue past its mark');
    expect(await inFlight(t)).toBe(0);
    expect(ok(await post(t, { query: '{ __typename }' }))).toBe(true);
    expect(await refusals(t, 'overloaded')).toBe(0);
    for (const watcher of await Promise.all(watchers)) await watcher.body?.cancel();
    t.reference.releaseHeld();
  });
});
