import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Fault } from '../src/reference-upstream/faults.js';
import type { OperationName } from '../src/domain/operations.js';
import { startTestGateway, type GraphQLResponse, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { until } from './support/until.js';

/*
 * The upstream's circuit breaker (CIRCUIT_BREAKER_*) and the retry budget (UPSTREAM_RETRY_BUDGET_*)
 * against the reference upstream and its faults. The breaker is one per gateway: each test builds
 * its own. Defaults unless a block says otherwise: the breaker opens once at least 10 of the last
 * 20 attempts were made and more than half of them failed; a read is tried 3 times at most.
 */

const headReads: readonly OperationName[] = ['getHeadExt', 'getHeadById', 'getHeadExtById'];
const faultHeadReads = (t: TestGateway, fault: Fault, times: number) => headReads.forEach((operation) => t.reference.injectFault(operation, fault, times));
const headQuery = `query($id: ID!) { head(id: $id) { uuid name } }`;
const deleteMutation = `mutation($id: ID!) { deleteHead(input: { id: $id }) { deletedHeadUuid } }`;
const codes = (response: GraphQLResponse) => (response.errors ?? []).map((e) => e.extensions?.code);
const metric = async (t: TestGateway, series: string) => sampleOf(await t.metrics.registry.metrics(), series);
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

/** The breaker is open: a read and a change fail at once, UPSTREAM_UNAVAILABLE "circuit open", and nothing reaches the upstream. */
async function expectFailsFast(t: TestGateway, id: string): Promise<void> {
  t.reset();
  const read = await t.execute(headQuery, { id });
  expect(read.data).toEqual({ head: null });
  expect(read.errors).toHaveLength(1);
  expect(read.errors![0]!.extensions).toEqual({ code: 'UPSTREAM_UNAVAILABLE', upstream: { operation: expect.any(String), reason: 'circuit open', sent: false } });
  expect(read.errors![0]!.message).toContain('circuit breaker is open');
  const change = await t.execute(deleteMutation, { id }, { authorization: 'Bearer anything' });
  expect(codes(change)).toEqual(['UPSTREAM_UNAVAILABLE']);
  expect(change.errors![0]!.extensions).toMatchObject({ upstream: { operation: 'deleteHead', reason: 'circuit open', sent: false } });
  // Nothing was sent, not even attempted.
  expect(t.calls()).toEqual([]);
  expect(t.attempts).toEqual([]);
}

describe('the circuit breaker opens on upstream faults and then fails fast', () => {
  it('under 503s: the 10th failed attempt opens it (its read is not retried); then reads and changes make no call; /ready and /metrics say so', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(0);
    faultHeadReads(t, { kind: 'status', status: 503 }, 100);
    // Reads 1 to 3 make 3 attempts each; the 4th read's first attempt is the 10th failure.
    for (let n = 1; n <= 3; n++) expect(codes(await t.execute(headQuery, { id }))).toEqual(['UPSTREAM_ERROR']);
    const fourth = await t.execute(headQuery, { id });
    expect(codes(fourth)).toEqual(['UPSTREAM_ERROR']);
    expect(t.calls().map((r) => r.status)).toEqual(Array(10).fill(503));
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(1);
    expect(await metric(t, 'gateway_upstream_circuit_state_changes_total{state="open"}')).toBe(1);

    await expectFailsFast(t, id);
    expect(await ready(t)).toEqual({ status: 503, body: { status: 'not ready', reason: 'circuit open' } });
  });

  it('under connection refused (the upstream stopped): reads fail at once once it is open', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    await t.reference.close();
    // Each read tries 3 times (ECONNREFUSED is retried): the 4th read's first attempt opens it.
    expect(await readUntil(t, id, 'UPSTREAM_UNAVAILABLE')).toBe(1);
    for (let n = 2; n <= 4; n++) await t.execute(headQuery, { id });
    expect(t.attempts).toHaveLength(10);
    expect(t.attempts.every((a) => a.code === 'UPSTREAM_UNAVAILABLE')).toBe(true);
    await expectFailsFast(t, id);
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
      await expectFailsFast(t, id);
    });
  });

  it('never opens on 4xx answers: 401, 404 and 422 are answers from a working upstream', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    faultHeadReads(t, { kind: 'status', status: 404 }, 10);
    faultHeadReads(t, { kind: 'status', status: 401, body: { detail: 'Not authenticated' } }, 10);
    for (let n = 1; n <= 20; n++) expect(codes(await t.execute(headQuery, { id }))).not.toEqual([]);
    t.reference.injectFault('deleteHead', { kind: 'status', status: 422, body: { detail: [] } }, 10);
    for (let n = 1; n <= 10; n++) expect(codes(await t.execute(deleteMutation, { id }, { authorization: 'Bearer anything' }))).toEqual(['BAD_USER_INPUT']);
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(0);
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
      const pending = fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: headQuery, variables: { id } }), signal: controller.signal });
      await until(() => t.reference.inFlight() === 1, 'the read held at the upstream');
      controller.abort();
      await expect(pending).rejects.toThrow();
      await until(() => t.reference.inFlight() === 0, 'the call cancelled');
    }
    await until(() => t.attempts.length === 12, 'the cancelled attempts counted');
    expect(t.attempts.map((a) => a.code)).toEqual(Array(12).fill('ABORTED'));
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(0);
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
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(1);
    t.reset();
    return { t, id, openedAt: Date.now() };
  };

  it('a successful probe closes it: the upstream is called again and /ready says ready', async () => {
    const { t, id, openedAt } = await openOn503s();
    vi.setSystemTime(openedAt + 4_999);
    await expectFailsFast(t, id);
    vi.setSystemTime(openedAt + 5_000);
    const probe = await t.execute(headQuery, { id });
    expect(probe.errors).toBeUndefined();
    expect(t.calls()).toHaveLength(1);
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(0);
    expect(await metric(t, 'gateway_upstream_circuit_state_changes_total{state="half_open"}')).toBe(1);
    expect(await metric(t, 'gateway_upstream_circuit_state_changes_total{state="closed"}')).toBe(1);
    expect((await t.execute(deleteMutation, { id: t.reference.store.headIds()[1]! }, { authorization: 'Bearer anything' })).errors?.[0]?.extensions?.code).not.toBe('UPSTREAM_UNAVAILABLE');
    expect(await ready(t)).toEqual({ status: 200, body: { status: 'ready' } });
  });

  it('a failed probe opens it again for another 5 s, without a retry of the probe', async () => {
    const { t, id, openedAt } = await openOn503s();
    vi.setSystemTime(openedAt + 5_000);
    faultHeadReads(t, { kind: 'status', status: 503 }, 3);
    expect(codes(await t.execute(headQuery, { id }))).toEqual(['UPSTREAM_ERROR']);
    expect(t.calls()).toHaveLength(1);
    await expectFailsFast(t, id);
    expect(await metric(t, 'gateway_upstream_circuit_state_changes_total{state="open"}')).toBe(2);
  });

  it('while the probe is in flight, other calls fail at once instead of queueing behind it', async () => {
    const { t, id, openedAt } = await openOn503s();
    vi.setSystemTime(openedAt + 5_000);
    faultHeadReads(t, { kind: 'latency', ms: 600_000 }, 1);
    const probe = t.execute(headQuery, { id });
    await until(() => t.reference.inFlight() === 1, 'the probe held at the upstream');
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(2);
    const other = await t.execute(headQuery, { id: t.reference.store.headIds()[1]! });
    expect(other.errors![0]!.extensions).toMatchObject({ code: 'UPSTREAM_UNAVAILABLE', upstream: { reason: 'circuit open' } });
    expect(await ready(t)).toEqual({ status: 503, body: { status: 'not ready', reason: 'circuit open' } });
    t.reference.releaseHeld();
    expect((await probe).errors).toBeUndefined();
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(0);
  });
});

describe('the retry budget (UPSTREAM_RETRY_BUDGET_RATIO 0.2, no minimum) under sustained 503s', () => {
  it('30 reads make 36 calls, not 90: one retry per five calls', async () => {
    // The breaker kept out of the way (it would open long before): this block is about the budget.
    const t = await start({ UPSTREAM_RETRY_BUDGET_MIN_PER_SECOND: '0', CIRCUIT_BREAKER_WINDOW: '1000', CIRCUIT_BREAKER_MIN_CALLS: '1000' });
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
    for (let n = 1; n <= 10; n++) expect(codes(await t.execute(headQuery, { id: ids[n]! }))).toEqual(['UPSTREAM_ERROR']);
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(1);
    // CIRCUIT_BREAKER_RESET_MS later the next read is the probe; the upstream holds it.
    vi.advanceTimersByTime(5_000);
    faultHeadReads(t, { kind: 'latency', ms: 600_000 }, 1);
    const probe = t.execute(headQuery, { id: ids[11]! });
    await until(() => t.reference.inFlight() === 2, 'the probe held at the upstream');
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(2);
    // The late read's own timeout (10 s after it was sent) passes while the probe is out.
    vi.advanceTimersByTime(5_000);
    expect(codes(await late)).toEqual(['UPSTREAM_TIMEOUT']);
    // The probe succeeds: that closes the breaker, whatever the late read said.
    t.reference.releaseHeld();
    expect((await probe).errors).toBeUndefined();
    expect(await metric(t, 'gateway_upstream_circuit_state')).toBe(0);
    t.reset();
    expect((await t.execute(headQuery, { id: ids[12]! })).errors).toBeUndefined();
    expect(t.calls()).toHaveLength(1);
  });
});
