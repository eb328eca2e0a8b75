import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { OperationName } from '../src/domain/operations.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type Fault, type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { HeadShape } from '../src/reference-upstream/store.js';
import { type GraphQLResponse, startTestGateway, type TestGateway } from './support/gateway.js';
import { until } from './support/until.js';

/*
 * Resilience against the real reference upstream on loopback: one deadline per operation,
 * cancellation when the client goes away, exact call counts under flaky sequences (retries of
 * GETs only, never of writes), recovery after the upstream restarts, and the response size cap.
 */

type ErrorEntry = NonNullable<GraphQLResponse['errors']>[number];

const codeAt = (response: GraphQLResponse, path: string) =>
  response.errors?.find((e) => e.path?.join('.') === path)?.extensions?.code;
const codes = (response: GraphQLResponse) => (response.errors ?? []).map((e: ErrorEntry) => e.extensions?.code);

const headName = (t: TestGateway, id: string) => t.reference.store.findHead(id)!.head.name;

/*
 * Which by-id read serves `head(id)` is the planner's choice (it picks the cheapest read that
 * covers the selection), so faults go on every by-id read and calls are counted across them.
 */
const headReads: readonly OperationName[] = ['getHeadExt', 'getHeadById', 'getHeadExtById'];
const faultHeadReads = (t: TestGateway, fault: Fault, times = 1) => {
  for (const operation of headReads) t.reference.injectFault(operation, fault, times);
};
const headReadCalls = (t: TestGateway) =>
  t.calls().filter((r) => r.operation !== undefined && headReads.includes(r.operation));
const calledIds = (t: TestGateway) => headReadCalls(t).map((r) => /[0-9a-f]{8}-[0-9a-f-]{27}/.exec(r.path)?.[0]);
/** An answer the upstream holds until the test releases it (`releaseHeld`) or the caller goes. */
const held: Fault = { kind: 'latency', ms: 600_000 };
/** The fake clock of the transport's timeouts and backoff and of the operation's deadline. */
const fakeClock = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });

describe('one deadline per operation', () => {
  let t: TestGateway;
  let ids: string[];

  // Each call may take 15 s, the operation 20 s: on a fake clock the test moves while the upstream
  // holds its answers, so which limit cuts a call never depends on how fast the machine is.
  beforeAll(async () => {
    // Fanout 1 makes the order of the upstream calls (and so which one takes a fault) deterministic.
    t = await startTestGateway({
      env: { OPERATION_TIMEOUT_MS: '20000', UPSTREAM_TIMEOUT_MS: '15000', UPSTREAM_FANOUT: '1' },
    });
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());
  beforeEach(() => {
    t.reset();
    fakeClock();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** The nth by-id read has reached the upstream, which holds it. */
  const holding = (n: number) =>
    until(() => headReadCalls(t).length === n && t.reference.inFlight() === 1, `read ${n} held at the upstream`);

  it('answers with the fast field and UPSTREAM_TIMEOUT for the slow one, and cancels the slow call', async () => {
    const [a, b] = [ids[0]!, ids[1]!];
    faultHeadReads(t, held);
    faultHeadReads(t, held);
    const pending = t.execute<{ fast: { name: string } | null; slow: unknown }>(
      `query($a: ID!, $b: ID!) { fast: head(id: $a) { name } slow: head(id: $b) { name } }`,
      { a, b },
    );
    await holding(1);
    t.reference.releaseHeld();
    await holding(2);
    // The slow call's own timeout passes (the deadline is further off); the upstream still holds it.
    vi.advanceTimersByTime(15_000);
    const response = await pending;
    expect(response.data).toEqual({ fast: { name: headName(t, a) }, slow: null });
    expect(codes(response)).toEqual(['UPSTREAM_TIMEOUT']);
    expect(codeAt(response, 'slow')).toBe('UPSTREAM_TIMEOUT');
    expect(calledIds(t)).toEqual([a, b]);
    // The pending call was aborted, not left running: the upstream sees its client go.
    await until(() => t.reference.inFlight() === 0, 'the slow call cancelled');
    expect(headReadCalls(t).map((r) => r.status)).toEqual([200, undefined]);
  });

  it('the deadline cuts a call its own timeout would still allow, and calls queued after it are never sent', async () => {
    const [a, b, c] = [ids[2]!, ids[3]!, ids[4]!];
    faultHeadReads(t, held);
    faultHeadReads(t, held);
    const pending = t.execute(
      `query($a: ID!, $b: ID!, $c: ID!) { fast: head(id: $a) { name } slow: head(id: $b) { name } late: head(id: $c) { name } }`,
      { a, b, c },
    );
    await holding(1);
    // a answers 6 s into the operation: b starts with 14 s left, less than its own 15 s.
    vi.advanceTimersByTime(6_000);
    t.reference.releaseHeld();
    await holding(2);
    // At 20 s the deadline cuts b (its own timeout would run to 21 s); c, queued behind b, is
    // refused unsent.
    vi.advanceTimersByTime(14_000);
    const response = await pending;
    expect(response.data).toEqual({ fast: { name: headName(t, a) }, slow: null, late: null });
    expect(codeAt(response, 'slow')).toBe('UPSTREAM_TIMEOUT');
    expect(codeAt(response, 'late')).toBe('UPSTREAM_TIMEOUT');
    expect(response.errors!.find((e) => e.path?.[0] === 'slow')!.message).toContain('operation deadline');
    expect(response.errors!.find((e) => e.path?.[0] === 'late')!.message).toContain('operation deadline');
    expect(calledIds(t)).toEqual([a, b]);
    // Two attempts, the second cut: c never became one.
    expect(t.attempts.map((attempt) => attempt.code)).toEqual([undefined, 'UPSTREAM_TIMEOUT']);
    await until(() => t.reference.inFlight() === 0, 'the cut call cancelled');
  });

  it('the next operation gets a deadline of its own', async () => {
    const query = `query($a: ID!) { head(id: $a) { name } }`;
    expect((await t.execute(query, { a: ids[5]! })).errors).toBeUndefined();
    // Past the first operation's deadline, a second one still has all of its own.
    vi.advanceTimersByTime(20_001);
    const response = await t.execute(query, { a: ids[6]! });
    expect(response.errors).toBeUndefined();
    expect(calledIds(t)).toEqual([ids[5], ids[6]]);
  });
});

describe('a client that disconnects', () => {
  let t: TestGateway;
  let server: Server;
  let url: string;

  beforeAll(async () => {
    // Longer than any test may run: only the gateway cancelling a call can end it early.
    // Every operation logged: its line says when the operation has ended.
    t = await startTestGateway({
      env: { OPERATION_TIMEOUT_MS: '120000', UPSTREAM_TIMEOUT_MS: '60000', OPERATION_LOG: 'all' },
    });
    server = createServer(t.handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await t.close();
  });
  beforeEach(() => t.reset());

  it('cancels its upstream calls, without retrying them', async () => {
    const id = t.reference.store.headIds()[0]!;
    faultHeadReads(t, held);
    const controller = new AbortController();
    const pending = fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        'x-request-id': 'goes-away',
      },
      body: JSON.stringify({ query: `query($id: ID!) { head(id: $id) { name } }`, variables: { id } }),
      signal: controller.signal,
    });
    await until(() => t.reference.inFlight() === 1, 'the read held at the upstream');
    controller.abort();
    await expect(pending).rejects.toThrow();
    // The upstream would hold the answer for 10 minutes and the call could wait 60 s.
    await until(() => t.reference.inFlight() === 0, 'the upstream call cancelled');
    // The operation has ended (its log line is written): nothing more will be sent for it.
    await until(
      () =>
        t.logLines.some(
          (line) => line.includes('"msg":"graphql operation"') && line.includes('"requestId":"goes-away"'),
        ),
      'the operation log line',
    );
    expect(headReadCalls(t)).toHaveLength(1);
    expect(t.attempts.map((a) => [a.code, a.retry])).toEqual([['ABORTED', false]]);
  });

  it('the server keeps serving other clients afterwards', async () => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query: '{ heads(first: 2) { totalCount nodes { name } } }' }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as GraphQLResponse<{ heads: { nodes: unknown[] } }>;
    expect(body.errors).toBeUndefined();
    expect(body.data!.heads.nodes).toHaveLength(2);
  });
});

describe('flaky upstream sequences: exact call counts', () => {
  let t: TestGateway;
  let ids: string[];
  let token: string;
  const headQuery = `query($id: ID!) { head(id: $id) { uuid name } }`;

  // A gateway per test, with the production settings (10 s per call, two retries with 25 ms base
  // backoff): these tests fail many calls on purpose, and the circuit breaker, one per gateway,
  // would open on the sum of them and refuse the next test's calls.
  beforeEach(async () => {
    t = await startTestGateway();
    ids = t.reference.store.headIds();
    const login = await t.execute<{ login: { accessToken: string } }>(
      'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
      {
        input: DEMO_CREDENTIALS,
      },
    );
    token = login.data!.login.accessToken;
    t.reset();
  });
  afterEach(async () => {
    expect(t.reference.inFlight()).toBe(0);
    await t.close();
  });

  it('GET: 503, 503, success is 3 calls and data', async () => {
    faultHeadReads(t, { kind: 'status', status: 503 }, 2);
    const response = await t.execute(headQuery, { id: ids[0]! });
    expect(response.errors).toBeUndefined();
    expect(response.data).toEqual({ head: { uuid: ids[0], name: headName(t, ids[0]!) } });
    expect(headReadCalls(t).map((r) => r.status)).toEqual([503, 503, 200]);
    expect(t.calls()).toHaveLength(3);
    expect(t.attempts.map((a) => a.retry)).toEqual([false, true, true]);
  });

  it('GET: 503 three times is 3 calls and UPSTREAM_ERROR (no fourth)', async () => {
    faultHeadReads(t, { kind: 'status', status: 503 }, 3);
    const response = await t.execute(headQuery, { id: ids[0]! });
    expect(response.data).toEqual({ head: null });
    expect(response.errors).toHaveLength(1);
    expect(response.errors![0]!.extensions).toMatchObject({ code: 'UPSTREAM_ERROR', upstream: { status: 503 } });
    expect(headReadCalls(t)).toHaveLength(3);
    expect(t.calls()).toHaveLength(3);
  });

  it.each([502, 504])('GET: %i, success is 2 calls and data', async (status) => {
    faultHeadReads(t, { kind: 'status', status });
    const response = await t.execute(headQuery, { id: ids[5]! });
    expect(response.errors).toBeUndefined();
    expect(response.data).toEqual({ head: { uuid: ids[5], name: headName(t, ids[5]!) } });
    expect(headReadCalls(t).map((r) => r.status)).toEqual([status, 200]);
    expect(t.attempts.map((a) => [a.status, a.retry])).toEqual([
      [status, false],
      [200, true],
    ]);
  });

  it('GET: drop, success is 2 calls and data', async () => {
    faultHeadReads(t, { kind: 'drop' });
    const response = await t.execute(headQuery, { id: ids[1]! });
    expect(response.errors).toBeUndefined();
    expect(response.data).toEqual({ head: { uuid: ids[1], name: headName(t, ids[1]!) } });
    expect(headReadCalls(t).map((r) => r.status)).toEqual([undefined, 200]);
    expect(t.calls()).toHaveLength(2);
    expect(t.attempts.map((a) => [a.code, a.retry])).toEqual([
      ['UPSTREAM_UNAVAILABLE', false],
      [undefined, true],
    ]);
  });

  it('GET: an answer later than the call timeout is 1 call and UPSTREAM_TIMEOUT (the timeout covers retries), then the next operation succeeds with 1 call', async () => {
    faultHeadReads(t, held);
    fakeClock();
    try {
      const pending = t.execute(headQuery, { id: ids[2]! });
      await until(() => t.reference.inFlight() === 1, 'the read held at the upstream');
      vi.advanceTimersByTime(10_000);
      const response = await pending;
      expect(response.data).toEqual({ head: null });
      expect(codes(response)).toEqual(['UPSTREAM_TIMEOUT']);
    } finally {
      vi.useRealTimers();
    }
    expect(t.calls()).toHaveLength(1);
    expect(t.attempts.map((a) => [a.code, a.retry])).toEqual([['UPSTREAM_TIMEOUT', false]]);
    await until(() => t.reference.inFlight() === 0, 'the timed-out call cancelled');

    t.reset();
    const next = await t.execute(headQuery, { id: ids[2]! });
    expect(next.errors).toBeUndefined();
    expect(next.data).toEqual({ head: { uuid: ids[2], name: headName(t, ids[2]!) } });
    expect(t.calls()).toHaveLength(1);
  });

  it('GET listing: 503, drop, success is 3 calls and the page', async () => {
    t.reference.injectFault('listHeads', { kind: 'status', status: 503 });
    t.reference.injectFault('listHeads', { kind: 'drop' });
    const response = await t.execute<{ heads: { nodes: unknown[] } }>(`{ heads(first: 3) { nodes { uuid } } }`);
    expect(response.errors).toBeUndefined();
    expect(response.data!.heads.nodes).toHaveLength(3);
    expect(t.calls('listHeads')).toHaveLength(3);
  });

  it('PATCH: a 503 on updateHead is sent exactly once and is UPSTREAM_ERROR', async () => {
    const id = ids[3]!;
    const before = headName(t, id);
    t.reference.injectFault('updateHead', { kind: 'status', status: 503 });
    const response = await t.execute(
      `mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { name } } }`,
      { input: { id, name: 'renamed by a test' } },
    );
    expect(response.data).toBeNull();
    expect(response.errors).toHaveLength(1);
    expect(response.errors![0]!.extensions).toMatchObject({
      code: 'UPSTREAM_ERROR',
      upstream: { operation: 'updateHead', status: 503 },
    });
    expect(t.calls('updateHead')).toHaveLength(1);
    expect(t.calls()).toHaveLength(1);
    expect(headName(t, id)).toBe(before);
  });

  describe('an upstream 429 (it limits its rate)', () => {
    const post = (query: string, variables: Record<string, unknown>) =>
      t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      });

    it("GET: 1 call, never retried; UPSTREAM_UNAVAILABLE with the upstream's Retry-After in ms, and Retry-After on the answer that holds nothing else", async () => {
      faultHeadReads(t, { kind: 'status', status: 429, headers: { 'retry-after': '7' } });
      const response = await post(headQuery, { id: ids[0]! });
      expect(response.status).toBe(200);
      expect(response.headers.get('retry-after')).toBe('7');
      const body = (await response.json()) as GraphQLResponse;
      expect(body.data).toEqual({ head: null });
      expect(body.errors).toHaveLength(1);
      expect(body.errors![0]!.message).toBe(
        'Upstream is limiting the rate of calls: it refused this one and applied nothing; safe to retry later',
      );
      expect(body.errors![0]!.extensions).toEqual({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: { operation: headReadCalls(t)[0]!.operation, status: 429, reason: 'rate limited' },
        retryAfterMs: 7_000,
      });
      expect(headReadCalls(t).map((r) => r.status)).toEqual([429]);
      expect(t.calls()).toHaveLength(1);
      // Logged as a failure (OPERATION_LOG=failures), unlike a breaker's refusal: an upstream's limit is the operator's
      // business.
      const lines = t.logLines
        .map((line) => JSON.parse(line) as { msg: string; outcome?: string; errorCodes?: string[] })
        .filter((line) => line.msg === 'graphql operation');
      expect(lines).toMatchObject([{ outcome: 'error', errorCodes: ['UPSTREAM_UNAVAILABLE'] }]);
    });

    it('GET: an HTTP-date Retry-After is counted from now, and an answer with a field served carries none', async () => {
      const inTwoMinutes = new Date(Date.now() + 120_000).toUTCString();
      faultHeadReads(t, { kind: 'status', status: 429, headers: { 'retry-after': inTwoMinutes } });
      const response = await post(`query($id: ID!) { heads(first: 1) { totalCount } head(id: $id) { uuid } }`, {
        id: ids[1]!,
      });
      expect(response.headers.get('retry-after')).toBeNull();
      const body = (await response.json()) as GraphQLResponse<{ heads: { totalCount: number }; head: null }>;
      expect(body.data!.head).toBeNull();
      expect(body.data!.heads.totalCount).toBeGreaterThan(0);
      const retryAfterMs = body.errors![0]!.extensions!.retryAfterMs as number;
      expect(retryAfterMs).toBeGreaterThan(110_000);
      expect(retryAfterMs).toBeLessThanOrEqual(120_000);
    });

    it('PATCH: sent once, UPSTREAM_UNAVAILABLE (the change not applied); without Retry-After, no retryAfterMs', async () => {
      const id = ids[3]!;
      const before = headName(t, id);
      t.reference.injectFault('updateHead', { kind: 'status', status: 429 });
      const response = await t.execute(
        `mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { name } } }`,
        { input: { id, name: 'renamed by a test' } },
      );
      expect(response.errors![0]!.extensions).toEqual({
        code: 'UPSTREAM_UNAVAILABLE',
        upstream: { operation: 'updateHead', status: 429, reason: 'rate limited' },
      });
      expect(t.calls('updateHead')).toHaveLength(1);
      expect(headName(t, id)).toBe(before);
    });

    it("is not a fault for the breakers: after 20 of them the route's next read is served", async () => {
      t.reference.injectFault('listHeads', { kind: 'status', status: 429, headers: { 'retry-after': '1' } }, 20);
      for (let i = 0; i < 20; i++)
        expect(codes(await t.execute('{ heads(first: 1) { totalCount } }'))).toEqual(['UPSTREAM_UNAVAILABLE']);
      const next = await t.execute<{ heads: { totalCount: number } }>('{ heads(first: 1) { totalCount } }');
      expect(next.errors).toBeUndefined();
      expect(next.data!.heads.totalCount).toBeGreaterThan(0);
      expect(t.calls('listHeads')).toHaveLength(21);
    });
  });

  it('DELETE: a connection dropped after the upstream read the request is sent exactly once and UPSTREAM_OUTCOME_UNKNOWN (the change may have been applied)', async () => {
    const id = ids[4]!;
    t.reference.injectFault('deleteHead', { kind: 'drop' });
    const response = await t.execute(
      `mutation($input: DeleteHeadInput!) { deleteHead(input: $input) { deletedHeadUuid } }`,
      { input: { id } },
      {
        authorization: `Bearer ${token}`,
      },
    );
    expect(response.data).toBeNull();
    expect(codes(response)).toEqual(['UPSTREAM_OUTCOME_UNKNOWN']);
    expect(t.calls('deleteHead')).toHaveLength(1);
    expect(t.calls()).toHaveLength(1);
    expect(t.reference.store.findHead(id)).toBeDefined();
  });
});

describe('an upstream that stops and comes back on the same port', () => {
  let t: TestGateway;
  let restarted: ReferenceUpstream | undefined;

  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    await restarted?.close();
    await t.close();
  });

  it('is UPSTREAM_UNAVAILABLE after 3 attempts (a change after 1), then the same gateway recovers without a restart', async () => {
    const query = `{ heads(first: 2) { totalCount nodes { uuid name } } }`;
    // Warm the pool: a keep-alive connection to the upstream exists when it goes away.
    const warm = await t.execute<{ heads: { totalCount: number } }>(query);
    expect(warm.errors).toBeUndefined();
    const port = Number(new URL(t.reference.url).port);
    await t.reference.close();

    t.reset();
    const down = await t.execute(query);
    expect(down.data).toBeNull();
    expect(codes(down)).toEqual(['UPSTREAM_UNAVAILABLE']);
    expect(t.attempts.map((a) => [a.operation, a.code, a.retry])).toEqual([
      ['listHeads', 'UPSTREAM_UNAVAILABLE', false],
      ['listHeads', 'UPSTREAM_UNAVAILABLE', true],
      ['listHeads', 'UPSTREAM_UNAVAILABLE', true],
    ]);
    const text = JSON.stringify(down);
    expect(text).not.toContain(`:${port}`);
    expect(text).not.toContain('ECONNREFUSED');

    // A change that could not connect never left: UPSTREAM_UNAVAILABLE, safe to retry (it is not retried here).
    t.attempts.length = 0;
    const change = await t.execute(
      `mutation { login(input: { username: "demo", password: "demo-password" }) { accessToken } }`,
    );
    expect(codes(change)).toEqual(['UPSTREAM_UNAVAILABLE']);
    expect(t.attempts.map((a) => [a.operation, a.code])).toEqual([['login', 'UPSTREAM_UNAVAILABLE']]);

    restarted = await startReferenceUpstream({ port });
    t.attempts.length = 0;
    const up = await t.execute<{ heads: { totalCount: number; nodes: { uuid: string; name: string }[] } }>(query);
    expect(up.errors).toBeUndefined();
    expect(up.data!.heads.totalCount).toBe(restarted.store.headIds().length);
    expect(up.data!.heads.nodes.map((n) => n.uuid)).toEqual(restarted.store.headIds().slice(0, 2));
    expect(restarted.requests.map((r) => r.operation)).toEqual(['listHeads']);
    expect(t.attempts.map((a) => [a.status, a.retry])).toEqual([[200, false]]);
  });
});

/** Each by-id read's own on-contract answer for the head, padded (in `lod`) to about 8 KB. */
function faultBigHead(t: TestGateway, id: string): void {
  const entry = t.reference.store.findHead(id)!;
  const padded = (shape: HeadShape) => ({
    ...t.reference.store.project(entry, shape),
    lod: { padding: 'x'.repeat(8_000) },
  });
  t.reference.injectFault('getHeadExt', { kind: 'off-contract', body: padded(HeadShape.A_EXT) });
  t.reference.injectFault('getHeadById', { kind: 'off-contract', body: [padded(HeadShape.B)] });
  t.reference.injectFault('getHeadExtById', { kind: 'off-contract', body: padded(HeadShape.B_EXT) });
}

describe('an oversized upstream body (UPSTREAM_MAX_RESPONSE_BYTES 2048)', () => {
  let t: TestGateway;
  let ids: string[];

  beforeAll(async () => {
    t = await startTestGateway({ env: { UPSTREAM_MAX_RESPONSE_BYTES: '2048' } });
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  it('a page bigger than the cap is UPSTREAM_ERROR on that field, not retried; the listing is non-null, so data is null', async () => {
    const response = await t.execute(`{ heads(first: 100) { totalCount } }`);
    expect(response.data).toBeNull();
    expect(response.errors).toHaveLength(1);
    expect(response.errors![0]).toMatchObject({
      path: ['heads'],
      extensions: { code: 'UPSTREAM_ERROR', upstream: { operation: 'listHeads' } },
    });
    expect(response.errors![0]!.message).toContain('the body is too large');
    // Not retried: the answer would be as big the second time.
    expect(t.calls('listHeads')).toHaveLength(1);
  });

  it('fails only the field whose body is too large; the other fields keep their data', async () => {
    const [big, small] = [ids[0]!, ids[1]!];
    faultBigHead(t, big);
    const response = await t.execute<any>(
      `query($big: ID!, $small: ID!) { big: head(id: $big) { name } small: head(id: $small) { name } heads(first: 2) { nodes { uuid } } }`,
      { big, small },
    );
    expect(response.data.big).toBeNull();
    expect(response.data.small).toEqual({ name: headName(t, small) });
    expect(response.data.heads.nodes.map((n: { uuid: string }) => n.uuid)).toEqual(ids.slice(0, 2));
    expect(response.errors).toHaveLength(1);
    expect(response.errors![0]).toMatchObject({ path: ['big'], extensions: { code: 'UPSTREAM_ERROR' } });
    expect(response.errors![0]!.message).toContain('the body is too large');
  });
});

describe('the same padded body under a larger cap', () => {
  it('is served: the failure above was the size, not the content', async () => {
    const t = await startTestGateway({ env: { UPSTREAM_MAX_RESPONSE_BYTES: String(64 * 1024) } });
    try {
      const id = t.reference.store.headIds()[0]!;
      faultBigHead(t, id);
      const response = await t.execute<any>(`query($id: ID!) { head(id: $id) { name lod } }`, { id });
      expect(response.errors).toBeUndefined();
      expect(response.data.head.lod.padding).toHaveLength(8_000);
    } finally {
      await t.close();
    }
  });
});
