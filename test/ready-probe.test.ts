import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';
import { until } from './support/until.js';

/*
 * /ready while the upstream pool is full (issue 22): the probe has a connection of its own and a
 * timeout under a second, so it neither queues behind the operations nor waits for a call's own
 * timeout. The one wall-clock bound here is the issue's: an answer within 1 s, plus slack for a
 * loaded machine (it took 8.2 s before: the probe waited in the pool for a connection).
 */

const BOUND_MS = 1_000 + 2_000;

/** /ready's status, or `late` if it has not answered within the bound. */
async function readyWithin(t: TestGateway): Promise<number | 'late'> {
  const answered = (async () => (await t.gateway.fetch('http://gateway/ready')).status)();
  return Promise.race([answered, sleep(BOUND_MS, 'late' as const)]);
}

describe('/ready while operations hold every upstream connection', () => {
  let t: TestGateway | undefined;
  afterEach(async () => {
    t?.reference.releaseHeld();
    await t?.close();
    t = undefined;
  });

  /** 4 connections, 8 operations: 4 whose reads hang at the upstream, 4 waiting in the pool behind them. */
  async function fillThePool(on: TestGateway): Promise<Promise<unknown>[]> {
    const ids = on.reference.store.headIds();
    on.reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 }, 4);
    const operations = ids.slice(0, 8).map((id) => post(on, { query: `{ head(id: "${id}") { name } }` }));
    await until(() => on.reference.inFlight() === 4, 'every upstream connection held');
    return operations;
  }

  it('answers 200 at once when the upstream answers the probe: the probe does not wait in the pool', async () => {
    t = await startTestGateway({ env: { UPSTREAM_CONNECTIONS: '4' } });
    const operations = await fillThePool(t);
    expect(await readyWithin(t)).toBe(200);
    // The probe reached the upstream beside the four held reads.
    expect(t.calls('listHeads')).toHaveLength(1);
    expect(t.reference.maxInFlight()).toBe(5);
    t.reference.releaseHeld();
    await Promise.all(operations);
  });

  it('answers 503 within the bound when the upstream hangs for the probe too', async () => {
    t = await startTestGateway({ env: { UPSTREAM_CONNECTIONS: '4' } });
    const operations = await fillThePool(t);
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    expect(await readyWithin(t)).toBe(503);
    t.reference.releaseHeld();
    await Promise.all(operations);
  });
});
