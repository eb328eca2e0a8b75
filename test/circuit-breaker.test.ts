import { afterEach, describe, expect, it, vi } from 'vitest';
import type { OperationName } from '../src/domain/operations.js';
import type { Fault } from '../src/reference-upstream/faults.js';
import { startReferenceUpstream } from '../src/reference-upstream/server.js';
import { type GraphQLResponse, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { until } from './support/until.js';

/*
 * The upstream's circuit breakers (CIRCUIT_BREAKER_*) and the retry budget (UPSTREAM_RETRY_BUDGET_*)
 * against the reference upstream and its faults. The breakers are one set per gateway (the host's
 * and one per operation): each test builds its own. Defaults unless a block says otherwise: a
 * breaker opens once at least 10 of the last 20 attempts it judges were made and more than half of
 * them failed; a read is tried 3 times at most. `head(id) { uuid name }` reads Get Head By Id.
 */

const headReads: readonly OperationName[] = ['getHeadExt', 'getHeadById', 'getHeadExtById'];
const faultHeadReads = (t: TestGateway, fault: Fault, times: number) => {
  for (const operation of headReads) t.reference.injectFault(operation, fault, times);
};
const headQuery = `query($id: ID!) { head(id: $id) { uuid name } }`;
const listQuery = `{ heads(first: 2) { nodes { uuid } } }`;
const deleteMutation = `mutation($id: ID!) { deleteHead(input: { id: $id }) { deletedHeadUuid } }`;
const codes = (response: GraphQLResponse) => (response.errors ?? []).map((e) => e.extensions?.code);
const metric = async (t: TestGateway, series: string) => sampleOf(await t.metrics.registry.metrics(), series);
/** Get Head By Id's breaker now: 0 closed, 1 open, 2 half-open. */
const headBreaker = (t: TestGateway) => metric(t, 'gateway_upstream_circuit_state{operation="getHeadById"}');
const ready = async (t: TestGateway) => {
  const response = await t.gateway.fetch('http://gateway/ready');
  return { status: response.status, body: (await response.json()) as unknown };
};

let current: TestGateway | undefined;
const start = async (env: Record<string, string> = {}) => (current = await startTestGateway({ env }));
afterEach(async () => {
  vi.useRealTimers();
  current?.reference.releaseHeld();
  await current?.close();
  current = undefined;
});

/** Reads one head after another until one fails with `code` (at most `limit`); how many it took. */
async function readUntil(t: TestGateway, id: string, code: string, limit = 20): Promise<number> {
  for (let n = 1; n <= limit; n++) {
    const response = await t.execute(headQuery, { id });
    if (codes(response).includes(code)) return n;
  }
  throw new Error(`no ${code} in ${limit} reads`);
}

/**
 * A call an open breaker refused: UPSTREAM_UNAVAILABLE "circuit open", naming the operation, which breaker (its own or
 * the host's) and when to retry.
 */
function expectRefused(
  response: GraphQLResponse,
  operation: OperationName,
  circuit: 'operation' | 'host' = 'operation',
): void {
  expect(response.errors).toHaveLength(1);
  expect(response.errors![0]!.extensions).toEqual({
    code: 'UPSTREAM_UNAVAILABLE',
    upstream: { operation, reason: 'circuit open', circuit, sent: false },
    retryAfterMs: expect.any(Number),
  });
  expect(response.errors![0]!.message).toBe(
    circuit === 'host'
      ? 'Upstream is unreachable: its circuit breaker is open and the call was not sent; safe to retry later'
      : `Upstream operation ${operation} is failing: its circuit breaker is open and the call was not sent; safe to retry later`,
  );
}

/**
 * Get Head By Id's breaker is open: a read fails at once and reaches nothing; the other operations (a listing, a
 * change) are still sent.
 */
async function expectReadFailsFast(t: TestGateway, id: string): Promise<void> {
  t.reset();
  const read = await t.execute(headQuery, { id });
  expect(read.data).toEqual({ head: null });
  expectRefused(read, 'getHeadById');
  // Nothing was sent, not even attempted.
  expect(t.calls()).toEqual([]);
  expect(t.attempts).toEqual([]);
  expect((await t.execute(listQuery)).errors).toBeUndefined();
  expect(codes(await t.execute(deleteMutation, { id }, { authorization: 'Bearer anything' }))).not.toContain(
    'UPSTREAM_UNAVAILABLE',
  );
  expect(t.calls().map((call) => call.operation)).toEqual(['listHeads', 'deleteHead']);
}

/**
 * The host's breaker is open: reads and a change, whatever their operation, fail at once and nothing reaches the
 * upstream.
 */
async function expectEverythingFailsFast(t: TestGateway, id: string): Promise<void> {
  t.reset();
  const read = await t.execute(headQuery, { id });
  expect(read.data).toEqual({ head: null });
  expectRefused(read, 'getHeadById', 'host');
  expectRefused(await t.execute(listQuery), 'listHeads', 'host');
  expectRefused(await t.execute(deleteMutation, { id }, { authorization: 'Bearer anything' }), 'deleteHead', 'host');
  expect(t.attempts).toEqual([]);
}

describe("an operation's breaker opens on its faults and then fails its calls fast", () => {
  it("under 503s: the 10th failed attempt opens it (its read is not retried); then its reads make no call, the other operations' do; /metrics and the log say so once", async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    expect(await headBreaker(t)).toBe(0);
    faultHeadReads(t, { kind: 'status', status: 503 }, 100);
    // Reads 1 to 3 make 3 attempts each; the 4th read's first attempt is the 10th failure.
    for (let n = 1; n <= 3; n++) expect(codes(await t.execute(headQuery, { id }))).toEqual(['UPSTREAM_ERROR']);
    const fourth = await t.execute(headQuery, { id });
    expect(codes(fourth)).toEqual(['UPSTREAM_ERROR']);
    expect(t.calls().map((r) => r.status)).toEqual(Array(10).fill(503));
    expect(await headBreaker(t)).toBe(1);
    expect(await metric(t, 'gateway_upstream_circuit_state_changes_total{operation="getHeadById",state="open"}')).toBe(
      1,
    );
    expect(await metric(t, 'gateway_upstream_circuit_state{operation="listHeads"}')).toBe(0);
    expect(await metric(t, 'gateway_upstream_host_circuit_state')).toBe(0);

    await expectReadFailsFast(t, id);
    for (let n = 1; n <= 5; n++) expectRefused(await t.execute(headQuery, { id }), 'getHeadById');
    expect(await metric(t, 'gateway_upstream_circuit_refusals_total{operation="getHeadById"}')).toBe(6);
    // One line for the change of state, none for the six calls it refused.
    const breakerLines = t.logLines.filter((line) => line.includes('upstream circuit breaker'));
    expect(breakerLines).toHaveLength(1);
    expect(JSON.parse(breakerLines[0]!)).toMatchObject({
      level: 40,
      circuit: 'operation',
      operation: 'getHeadById',
      state: 'open',
      msg: 'upstream circuit breaker opened',
    });
    expect(t.logLines.filter((line) => line.includes('circuit breaker is open'))).toEqual([]);
  });

  it("under connection refused (the upstream stopped): the host's breaker opens, and every operation's calls fail at once; /ready says so", async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    await t.reference.close();
    // Each read tries 3 times (ECONNREFUSED is retried): the 4th read's first attempt opens it.
    expect(await readUntil(t, id, 'UPSTREAM_UNAVAILABLE')).toBe(1);
    for (let n = 2; n <= 4; n++) await t.execute(headQuery, { id });
    expect(t.attempts).toHaveLength(10);
    expect(t.attempts.every((a) => a.code === 'UPSTREAM_UNAVAILABLE')).toBe(true);
    expect(await metric(t, 'gateway_upstream_host_circuit_state')).toBe(1);
    // A failed connection is the host's: it says nothing of Get Head By Id's route.
    expect(await headBreaker(t)).toBe(0);
    await expectEverythingFailsFast(t, id);
    expect(await ready(t)).toEqual({ status: 503, body: { status: 'not ready', reason: 'upstream unreachable' } });
    expect(
      t.logLines.filter((line) => line.includes('upstream circuit breaker')).map((line) => JSON.parse(line) as unknown),
    ).toEqual([expect.objectContaining({ circuit: 'host', state: 'open', msg: 'upstream circuit breaker opened' })]);
  });

  describe('with a call timeout of 100 ms', () => {
    it('under timeouts: 10 calls that time out open it; the 11th read sends nothing', async () => {
      const t = await start({ UPSTREAM_TIMEOUT_MS: '100', OPERATION_TIMEOUT_MS: '5000' });
      const id = t.reference.store.headIds()[0]!;
      faultHeadReads(t, { kind: 'latency', ms: 600_000 }, 100);
      // A timed-out call is never retried: one attempt per read.
      for (let n = 1; n <= 10; n++) expect(codes(await t.execute(headQuery, { id }))).toEqual(['UPSTREAM_TIMEOUT']);
      expect(t.calls()).toHaveLength(10);
      expect(t.attempts.map((a) => a.code)).toEqual(Array(10).fill('UPSTREAM_TIMEOUT'));
      t.reference.releaseHeld();
      await until(() => t.reference.inFlight() === 0, 'the held calls answered');
      await expectReadFailsFast(t, id);
    });
  });

  it('never opens on 4xx answers: 401, 404 and 422 are answers from a working upstream', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    faultHeadReads(t, { kind: 'status', status: 404 }, 10);
    faultHeadReads(t, { kind: 'status', status: 401, body: { detail: 'Not authenticated' } }, 10);
    for (let n = 1; n <= 20; n++) expect(codes(await t.execute(headQuery, { id }))).not.toEqual([]);
    t.reference.injectFault('deleteHead', { kind: 'status', status: 422, body: { detail: [] } }, 10);
    for (let n = 1; n <= 10; n++)
      expect(codes(await t.execute(deleteMutation, { id }, { authorization: 'Bearer anything' }))).toEqual([
        'BAD_USER_INPUT',
      ]);
    expect(await headBreaker(t)).toBe(0);
    expect(await metric(t, 'gateway_upstream_circuit_state{operation="deleteHead"}')).toBe(0);
    t.reset();
    const read = await t.execute(headQuery, { id });
    expect(read.errors).toBeUndefined();
    expect(t.calls()).toHaveLength(1);
  });

  it('does not count a client going away (ABORTED): 12 reads cancelled at the upstream leave it closed', async () => {
    const t = await start();
    const url = await t.listen();
    const id = t.reference.store.headIds()[0]!;
    faultHeadReads(t, { kind: 'latency', ms: 600_000 }, 12);
    for (let n = 1; n <= 12; n++) {
      const controller = new AbortController();
      const pending = fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: headQuery, variables: { id } }),
        signal: controller.signal,
      });
      await until(() => t.reference.inFlight() === 1, 'the read held at the upstream');
      controller.abort();
      await expect(pending).rejects.toThrow();
      await until(() => t.reference.inFlight() === 0, 'the call cancelled');
    }
    await until(() => t.attempts.length === 12, 'the cancelled attempts counted');
    expect(t.attempts.map((a) => a.code)).toEqual(Array(12).fill('ABORTED'));
    expect(await headBreaker(t)).toBe(0);
    t.reset();
    expect((await t.execute(headQuery, { id })).errors).toBeUndefined();
    expect(t.calls()).toHaveLength(1);
  });
});

describe('after CIRCUIT_BREAKER_RESET_MS (5 s) one probe call is let through', () => {
  // The breaker reads Date's clock: a fake one (faked before the gateway is built) steps it exactly.
  const openOn503s = async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    faultHeadReads(t, { kind: 'status', status: 503 }, 10);
    for (let n = 1; n <= 4; n++) await t.execute(headQuery, { id });
    expect(await headBreaker(t)).toBe(1);
    t.reset();
    return { t, id, openedAt: Date.now() };
  };

  it('a successful probe closes it: the upstream is called again and /ready says ready', async () => {
    const { t, id, openedAt } = await openOn503s();
    vi.setSystemTime(openedAt + 4_000);
    const refused = await t.execute(headQuery, { id });
    expectRefused(refused, 'getHeadById');
    // Its probe is due in one second.
    expect(refused.errors![0]!.extensions!.retryAfterMs).toBe(1_000);
    vi.setSystemTime(openedAt + 4_999);
    await expectReadFailsFast(t, id);
    vi.setSystemTime(openedAt + 5_000);
    t.reset();
    const probe = await t.execute(headQuery, { id });
    expect(probe.errors).toBeUndefined();
    expect(t.calls()).toHaveLength(1);
    expect(await headBreaker(t)).toBe(0);
    expect(
      await metric(t, 'gateway_upstream_circuit_state_changes_total{operation="getHeadById",state="half_open"}'),
    ).toBe(1);
    expect(
      await metric(t, 'gateway_upstream_circuit_state_changes_total{operation="getHeadById",state="closed"}'),
    ).toBe(1);
    expect(
      t.logLines
        .filter((line) => line.includes('upstream circuit breaker'))
        .map((line) => (JSON.parse(line) as { state: string }).state),
    ).toEqual(['open', 'half_open', 'closed']);
    expect(await ready(t)).toEqual({ status: 200, body: { status: 'ready' } });
  });

  it('a failed probe opens it again for another 5 s, without a retry of the probe', async () => {
    const { t, id, openedAt } = await openOn503s();
    vi.setSystemTime(openedAt + 5_000);
    faultHeadReads(t, { kind: 'status', status: 503 }, 3);
    expect(codes(await t.execute(headQuery, { id }))).toEqual(['UPSTREAM_ERROR']);
    expect(t.calls()).toHaveLength(1);
    await expectReadFailsFast(t, id);
    expect(await metric(t, 'gateway_upstream_circuit_state_changes_total{operation="getHeadById",state="open"}')).toBe(
      2,
    );
  });

  it('while the probe is in flight, other calls fail at once instead of queueing behind it', async () => {
    const { t, id, openedAt } = await openOn503s();
    vi.setSystemTime(openedAt + 5_000);
    faultHeadReads(t, { kind: 'latency', ms: 600_000 }, 1);
    const probe = t.execute(headQuery, { id });
    await until(() => t.reference.inFlight() === 1, 'the probe held at the upstream');
    expect(await headBreaker(t)).toBe(2);
    const other = await t.execute(headQuery, { id: t.reference.store.headIds()[1]! });
    expectRefused(other, 'getHeadById');
    // One period from now: the probe's failure would open it again for that long.
    expect(other.errors![0]!.extensions!.retryAfterMs).toBe(5_000);
    // One operation's breaker: the replica stays in rotation.
    expect(await ready(t)).toEqual({ status: 200, body: { status: 'ready' } });
    t.reference.releaseHeld();
    expect((await probe).errors).toBeUndefined();
    expect(await headBreaker(t)).toBe(0);
  });

  it("the host's: a call of any operation is its probe, and its answer closes it for all", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    const port = Number(new URL(t.reference.url).port);
    await t.reference.close();
    for (let n = 1; n <= 4; n++) await t.execute(headQuery, { id });
    expect(await metric(t, 'gateway_upstream_host_circuit_state')).toBe(1);
    const openedAt = Date.now();
    const back = await startReferenceUpstream({ port });
    try {
      vi.setSystemTime(openedAt + 4_999);
      expectRefused(await t.execute(listQuery), 'listHeads', 'host');
      expect(back.requests).toEqual([]);
      vi.setSystemTime(openedAt + 5_000);
      expect((await t.execute(listQuery)).errors).toBeUndefined();
      expect(await metric(t, 'gateway_upstream_host_circuit_state')).toBe(0);
      expect((await t.execute(headQuery, { id })).errors).toBeUndefined();
      expect(back.requests.map((call) => call.operation)).toEqual(['listHeads', 'getHeadById']);
    } finally {
      await back.close();
    }
  });
});

describe('the retry budget (UPSTREAM_RETRY_BUDGET_RATIO 0.2, no minimum) under sustained 503s', () => {
  it('30 reads make 36 calls, not 90: one retry per five calls', async () => {
    // The breaker kept out of the way (it would open long before): this block is about the budget.
    const t = await start({
      UPSTREAM_RETRY_BUDGET_MIN_PER_SECOND: '0',
      CIRCUIT_BREAKER_WINDOW: '1000',
      CIRCUIT_BREAKER_MIN_CALLS: '1000',
    });
    const id = t.reference.store.headIds()[0]!;
    faultHeadReads(t, { kind: 'status', status: 503 }, 200);
    for (let n = 1; n <= 30; n++) expect(codes(await t.execute(headQuery, { id }))).toEqual(['UPSTREAM_ERROR']);
    expect(t.calls()).toHaveLength(36);
    expect(t.attempts.filter((a) => a.retry)).toHaveLength(6);
    // Every read had one retry refused (the 5th, 10th… had one retry granted, then the second refused).
    expect(await metric(t, 'gateway_upstream_retries_refused_total')).toBe(30);
  });

  it('by default (10 retries a second free) a blip is still retried in full', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    faultHeadReads(t, { kind: 'status', status: 503 }, 2);
    expect((await t.execute(headQuery, { id })).errors).toBeUndefined();
    expect(t.calls().map((r) => r.status)).toEqual([503, 503, 200]);
  });
});

describe('an attempt sent while closed that fails while the probe is out (cockatiel, issue 33 point 4)', () => {
  it("does not reopen the breaker under the probe: the probe's success closes it and the next read is sent", async () => {
    const t = await start();
    const ids = t.reference.store.headIds();
    // The call timeouts (10 s) and the breaker's clock on one fake clock, stepped by the test.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance', 'Date'] });
    // A read held at the upstream while the breaker is still closed: it runs into its own timeout later.
    faultHeadReads(t, { kind: 'latency', ms: 600_000 }, 1);
    const late = t.execute(headQuery, { id: ids[0]! });
    await until(() => t.reference.inFlight() === 1, 'the late read held at the upstream');
    // Ten 500s (never retried) open it.
    faultHeadReads(t, { kind: 'status', status: 500 }, 10);
    for (let n = 1; n <= 10; n++)
      expect(codes(await t.execute(headQuery, { id: ids[n]! }))).toEqual(['UPSTREAM_ERROR']);
    expect(await headBreaker(t)).toBe(1);
    // CIRCUIT_BREAKER_RESET_MS later the next read is the probe; the upstream holds it.
    vi.advanceTimersByTime(5_000);
    faultHeadReads(t, { kind: 'latency', ms: 600_000 }, 1);
    const probe = t.execute(headQuery, { id: ids[11]! });
    await until(() => t.reference.inFlight() === 2, 'the probe held at the upstream');
    expect(await headBreaker(t)).toBe(2);
    // The late read's own timeout (10 s after it was sent) passes while the probe is out.
    vi.advanceTimersByTime(5_000);
    expect(codes(await late)).toEqual(['UPSTREAM_TIMEOUT']);
    // The probe succeeds: that closes the breaker, whatever the late read said.
    t.reference.releaseHeld();
    expect((await probe).errors).toBeUndefined();
    expect(await headBreaker(t)).toBe(0);
    t.reset();
    expect((await t.execute(headQuery, { id: ids[12]! })).errors).toBeUndefined();
    expect(t.calls()).toHaveLength(1);
  });
});
