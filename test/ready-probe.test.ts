import { afterEach, describe, expect, it } from 'vitest';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';
import { until } from './support/until.js';

/*
 * /ready while the upstream pool is full (issue 22): the probe has a connection of its own and a
 * timeout under a second, so it neither queues behind the operations nor waits for a call's own
 * timeout. Held by the order of events, not a clock: /ready answers while every operation it
 * would have queued behind is still waiting. It took 8.2 s before (the probe waited in the pool
 * for a connection, which came back only when a held read ran out its UPSTREAM_TIMEOUT_MS and its
 * operation was answered).
 */

describe('/ready while operations hold every upstream connection', () => {
  let t: TestGateway | undefined;
  afterEach(async () => {
    t?.reference.releaseHeld();
    await t?.close();
    t = undefined;
  });

  /**
   * 4 connections, 8 operations: 4 whose reads hang at the upstream, 4 waiting in the pool behind them; and how many
   * are answered so far.
   */
  async function fillThePool(on: TestGateway): Promise<{ operations: Promise<unknown>[]; answered: () => number }> {
    const ids = on.reference.store.headIds();
    on.reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 }, 4);
    let answered = 0;
    const operations = ids
      .slice(0, 8)
      .map((id) => post(on, { query: `{ head(id: "${id}") { name } }` }).finally(() => answered++));
    await until(() => on.reference.inFlight() === 4, 'every upstream connection held');
    return { operations, answered: () => answered };
  }

  const ready = async (on: TestGateway) => (await on.gateway.fetch('http://gateway/ready')).status;
  // Eight operations queued on four connections: load shedding (by default at UPSTREAM_CONNECTIONS in flight) would
  // refuse the last four.
  const poolOfFour = { UPSTREAM_CONNECTIONS: '4', SHED_MAX_IN_FLIGHT: '0' };

  it('answers 200 when the upstream answers the probe, while every operation still waits: the probe does not wait in the pool', async () => {
    t = await startTestGateway({ env: poolOfFour });
    const { operations, answered } = await fillThePool(t);
    expect(await ready(t)).toBe(200);
    expect(answered()).toBe(0);
    // The probe reached the upstream beside the four held reads.
    expect(t.calls('listHeads')).toHaveLength(1);
    expect(t.reference.maxInFlight()).toBe(5);
    t.reference.releaseHeld();
    await Promise.all(operations);
  });

  it('answers 503 when the upstream hangs for the probe too, while every operation still waits: the probe gives up before any call times out', async () => {
    t = await startTestGateway({ env: poolOfFour });
    const { operations, answered } = await fillThePool(t);
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    expect(await ready(t)).toBe(503);
    // The four reads are still held: none has run out its own timeout.
    expect(answered()).toBe(0);
    expect(t.calls('getHeadById').filter((call) => call.endedAt === undefined)).toHaveLength(4);
    t.reference.releaseHeld();
    await Promise.all(operations);
  });
});
