import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type Answer, answer, jsonHeaders, startTestGateway, type TestGateway } from './support/gateway.js';
import { ok } from './support/limits.js';
import { sampleOf } from './support/metrics.js';
import { until } from './support/until.js';

/*
 * Fair shedding (server/traffic/load-shedder.ts, caller-shares.ts): overloaded, the gateway refuses
 * the callers that hold the most, not whoever comes next. Over real HTTP, each caller from a
 * client address of its own (TRUST_PROXY and X-Forwarded-For, as behind a proxy); slow reads
 * held at the reference upstream by a latency fault and released by the test. Counted, not timed.
 */

/** One Get Heads call at the upstream: the slow read. */
const slowRead = JSON.stringify({ query: '{ heads(first: 1) { nodes { uuid } } }' });

const overloadRefusals = async (t: TestGateway, reason: string) =>
  sampleOf(await t.metrics.registry.metrics(), `gateway_overload_refusals_total{reason="${reason}"}`) ?? 0;

const overloaded = (a: Answer) => a.status === 503 && a.body.errors?.[0]?.extensions?.code === 'OVERLOADED';

/** A caller: its token, from its client address. */
interface Caller {
  readonly address: string;
  readonly token: string;
}

/** A gateway on a port whose callers are their tokens and X-Forwarded-For addresses. */
async function fairGateway(env: Record<string, string>) {
  // Identical reads held at the upstream are counted by its calls: they would share one (UPSTREAM_DEDUPE).
  // The event loop is not watched: a busy test machine must not refuse for it.
  const t = await startTestGateway({
    env: { SHED_EVENT_LOOP_DELAY_MS: '0', UPSTREAM_DEDUPE: 'false', TRUST_PROXY: 'true', ...env },
  });
  const url = await t.listen();
  const send = async (body: string, from: Caller) =>
    answer(
      await fetch(url, {
        method: 'POST',
        headers: { ...jsonHeaders(), 'x-forwarded-for': from.address, authorization: `Bearer ${from.token}` },
        body,
      }),
    );
  return { t, send };
}

describe('SHED_MAX_IN_FLIGHT=20: one caller holds the cap', () => {
  let g: Awaited<ReturnType<typeof fairGateway>>;
  let headRead: string;
  beforeAll(async () => {
    g = await fairGateway({ SHED_MAX_IN_FLIGHT: '20' });
    headRead = JSON.stringify({ query: `{ head(id: "${g.t.reference.store.headIds()[0]!}") { name } }` });
  });
  afterAll(() => g.t.close());
  beforeEach(() => g.t.reset());
  // A test that failed leaves nothing held for the next.
  afterEach(() => void g.t.reference.releaseHeld());

  /**
   * `count` slow reads sent at once, `from` each; resolves once the upstream holds `held` of them and the rest are
   * answered.
   */
  async function slowReads(count: number, held: number, from: (i: number) => Caller) {
    const heldBefore = g.t.reference.inFlight();
    let answered = 0;
    const reads = Array.from({ length: count }, (_, i) => g.send(slowRead, from(i)).finally(() => answered++));
    await until(
      () => g.t.reference.inFlight() === heldBefore + held && answered === count - held,
      `${held} slow reads held, the other ${count - held} answered`,
    );
    return reads;
  }

  it('serves a newcomer while one token holds the whole cap: of 40 slow reads of one token 20 run and 20 are refused, then 3 other callers are served (before: 3 of 3 refused)', async () => {
    const [sharesBefore, capBefore] = [await overloadRefusals(g.t, 'caller_share'), await overloadRefusals(g.t, 'cap')];
    g.t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 40);
    const heavy = { address: '198.51.100.1', token: 'heavy-caller' };
    const reads = await slowReads(40, 20, () => heavy);

    const newcomers = await Promise.all(
      ['a', 'b', 'c'].map((name, i) =>
        g.send(headRead, { address: `198.51.100.${10 + i}`, token: `newcomer-${name}` }),
      ),
    );
    expect(newcomers.filter((a) => !ok(a))).toEqual([]);
    // The heavy caller is still refused, at the door, for its share.
    expect(overloaded(await g.send(headRead, heavy))).toBe(true);
    expect(await overloadRefusals(g.t, 'caller_share')).toBe(sharesBefore + 21);
    expect(await overloadRefusals(g.t, 'cap')).toBe(capBefore);

    expect(g.t.reference.releaseHeld()).toBe(20);
    const answers = await Promise.all(reads);
    expect(answers.filter(ok)).toHaveLength(20);
    expect(answers.filter(overloaded)).toHaveLength(20);
  });

  it('serves a caller with nothing in flight while one holds half the cap and ten others the rest; the half-holder is refused, a one-holder is not', async () => {
    g.t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 20);
    const half = { address: '198.51.100.20', token: 'half-caller' };
    const reads = await slowReads(10, 10, () => half);
    const others = await slowReads(10, 10, (i) => ({ address: `198.51.100.${30 + i}`, token: `one-of-ten-${i}` }));
    expect(ok(await g.send(headRead, { address: '198.51.100.50', token: 'nothing-in-flight' }))).toBe(true);
    expect(overloaded(await g.send(headRead, half))).toBe(true);
    expect(ok(await g.send(headRead, { address: '198.51.100.30', token: 'one-of-ten-0' }))).toBe(true);
    expect(g.t.reference.releaseHeld()).toBe(20);
    expect((await Promise.all([...reads, ...others])).every(ok)).toBe(true);
  });

  it('one address holds one share however many tokens it makes up: 20 of its 40 run, 20 are refused and so is its next new token; another address is served', async () => {
    g.t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 40);
    const minting = '198.51.100.60';
    const reads = await slowReads(40, 20, (i) => ({ address: minting, token: `minted-${i}` }));
    expect(overloaded(await g.send(headRead, { address: minting, token: 'minted-again' }))).toBe(true);
    expect(ok(await g.send(headRead, { address: '198.51.100.61', token: 'not-minted' }))).toBe(true);
    expect(g.t.reference.releaseHeld()).toBe(20);
    expect((await Promise.all(reads)).filter(overloaded)).toHaveLength(20);
  });
});

describe('the upstream pool saturated by operations that each fan out (UPSTREAM_CONNECTIONS=4, SHED_MAX_IN_FLIGHT=20)', () => {
  let g: Awaited<ReturnType<typeof fairGateway>>;
  beforeAll(async () => {
    g = await fairGateway({ UPSTREAM_CONNECTIONS: '4', SHED_MAX_IN_FLIGHT: '20' });
  });
  afterAll(() => g.t.close());

  it('counts as overloaded once UPSTREAM_FANOUT (10) calls wait for a connection, far below the cap: the caller whose operations fill the pool is refused, another is served', async () => {
    const ids = g.t.reference.store.headIds();
    // Ten Get Head By Id calls at once (UPSTREAM_FANOUT): two of these fill four connections and queue 16 calls.
    const tenReads = JSON.stringify({
      query: `{ nodes(ids: ${JSON.stringify(ids.slice(0, 10))}) { ... on Head { name } } }`,
    });
    const queued = async () => sampleOf(await g.t.metrics.registry.metrics(), 'gateway_upstream_calls_queued');
    const fanning = { address: '198.51.100.70', token: 'fanning-out' };
    g.t.reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 }, 4);
    const first = g.send(tenReads, fanning);
    await until(async () => g.t.reference.inFlight() === 4 && (await queued()) === 6, 'four calls held, six queued');
    const second = g.send(tenReads, fanning);
    await until(async () => (await queued()) === 16, 'sixteen calls queued');

    // Two operations in flight of a cap of 20; before, this one was taken and queued ten more calls.
    expect(overloaded(await g.send(tenReads, fanning))).toBe(true);
    // A caller with nothing in flight is taken: its call waits its turn in the queue.
    const newcomer = g.send(JSON.stringify({ query: `{ head(id: "${ids[10]!}") { name } }` }), {
      address: '198.51.100.71',
      token: 'newcomer',
    });
    await until(async () => (await queued()) === 17, "the newcomer's call queued");
    expect(g.t.reference.releaseHeld()).toBe(4);
    expect([await first, await second, await newcomer].every(ok)).toBe(true);
    expect(g.t.calls('getHeadById')).toHaveLength(21);
  });
});
