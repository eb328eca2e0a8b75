import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithFleet } from '../support/services.js';
import { until } from '../support/until.js';
import { recordFigures } from './figures.js';
import { type Fleet, metricTotal, startFleet } from './fleet.js';
import { describeTally, LOAD_CONNECTIONS, startLoad, type Tally } from './load.js';
import { demoToken, readsAndWrites } from './operations.js';

/*
 * Scenario a: every gateway restarted in turn (SIGTERM, exit, started again on the same ports,
 * back in HAProxy) under steady keep-alive load through HAProxy. SHUTDOWN_DELAY_MS keeps a
 * stopping gateway serving with /ready failing for longer than HAProxy's inter x fall (250 ms x 2).
 */

const SHUTDOWN_DELAY_MS = 1_500;

describeWithFleet('a rolling restart of every gateway behind HAProxy', () => {
  let fleet: Fleet;
  beforeAll(async () => {
    fleet = await startFleet({ SHUTDOWN_DELAY_MS: String(SHUTDOWN_DELAY_MS) });
  });
  afterAll(() => fleet?.close());

  it('loses no request under steady keep-alive load, and runs each mutation once', async () => {
    const ids = fleet.reference.store.headIds().slice(0, 8);
    const load = startLoad({
      url: fleet.url,
      connections: LOAD_CONNECTIONS,
      next: readsAndWrites(ids, await demoToken(fleet.url), 10),
    });
    const exitCodes: (number | null)[] = [];
    let tally: Tally;
    try {
      await load.progress(200);
      for (const gateway of fleet.gateways) {
        exitCodes.push((await fleet.restart(gateway)).exitCode);
        // It answers operations again before the next one goes: the fleet is never down to one.
        await until(
          async () => (await metricTotal(gateway, 'gateway_operation_duration_seconds_count')) > 0,
          `${gateway.name} serving again`,
          30_000,
          50,
        );
        await load.progress(100);
      }
    } finally {
      tally = await load.stop();
    }
    const retried = fleet.haproxy.requests().filter((request) => request.status === 200 && request.retries > 0).length;
    recordFigures('rolling restart', {
      requests: tally.sent,
      failed: tally.failed,
      failures: tally.failures,
      summary: describeTally(tally),
      'retried by HAProxy on another gateway (connection refused, answered)': retried,
      connections: LOAD_CONNECTIONS,
      SHUTDOWN_DELAY_MS,
    });
    expect(tally.failed, `${describeTally(tally)}\n${tally.samples.join('\n')}`).toBe(0);
    expect(exitCodes, 'each gateway stopped gracefully').toEqual([0, 0, 0]);
    // Each rename the load sent reached the upstream once: none lost, none sent twice.
    expect(fleet.reference.countsByOperation().updateHead).toBe(tally.byKind.write!.sent);
  });
});
