import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeWithFleet } from '../support/services.js';
import { recordFigures } from './figures.js';
import { type Fleet, startFleet } from './fleet.js';
import { describeTally, LOAD_CONNECTIONS, startLoad, type Tally } from './load.js';
import { demoToken, readsAndWrites } from './operations.js';

/*
 * Scenario b: one gateway killed outright (SIGKILL, as an OOM kill or a lost node) under steady
 * keep-alive load through HAProxy. What it had in flight is lost: HAProxy does not resend a
 * request a gateway may have run. For a request after the first on its client connection it
 * closes that connection without an answer and logs nothing (HAProxy 2.6 mimics the keep-alive
 * close a client is expected to retry); the first gets a 502. Until the process is gone its
 * kernel still takes connections, so requests sent while it dies are among those. Everything sent
 * once it is gone is answered: a refused connection is retried on another gateway, and the next
 * check takes it out.
 */

describeWithFleet('one gateway killed outright behind HAProxy', () => {
  let fleet: Fleet;
  beforeAll(async () => {
    fleet = await startFleet();
  });
  afterAll(() => fleet?.close());

  it("loses only requests it had taken when it died (at most the load's concurrency), none sent after, and runs no mutation twice", async () => {
    const ids = fleet.reference.store.headIds().slice(0, 8);
    const load = startLoad({
      url: fleet.url,
      connections: LOAD_CONNECTIONS,
      next: readsAndWrites(ids, await demoToken(fleet.url), 10),
    });
    const victim = fleet.gateways[1]!;
    let atKill: Tally;
    let atExit: Tally;
    let tally: Tally;
    try {
      await load.progress(300);
      atKill = load.tally();
      await victim.stop('SIGKILL');
      // Its exit seen: its sockets are closed, a connection to it is refused from here on.
      atExit = load.tally();
      await fleet.haproxy.waitFor(victim.name, 'DOWN');
      await load.progress(300);
    } finally {
      tally = await load.stop();
    }
    const lostAfter = tally.failedOperations.filter((operation) => operation >= atExit.sent).length;
    recordFigures('one gateway killed', {
      requests: tally.sent,
      failed: tally.failed,
      failures: tally.failures,
      summary: describeTally(tally),
      'in flight across the fleet at SIGKILL': atKill.inFlight,
      'sent while it died (SIGKILL to exit)': atExit.sent - atKill.sent,
      'lost of those sent after its exit': lostAfter,
      'retried by HAProxy on another gateway (connection refused, answered)': fleet.haproxy
        .requests()
        .filter((request) => request.status === 200 && request.retries > 0).length,
      "bound: the load's concurrency": LOAD_CONNECTIONS,
    });
    const detail = `${describeTally(tally)}\n${tally.samples.join('\n')}`;
    expect(lostAfter, detail).toBe(0);
    // Each lost request was one the gateway held when it died: never more than the load has in flight.
    expect(tally.failed, detail).toBeLessThanOrEqual(LOAD_CONNECTIONS);
    // Closed without an answer, or a 502 for the first request of a client connection (HAProxy has no keep-alive close
    // to mimic then).
    expect(
      Object.keys(tally.failures).filter((kind) => kind !== 'network UND_ERR_SOCKET' && kind !== 'http 502'),
      detail,
    ).toEqual([]);
    // A rename the victim took may or may not have reached the upstream; none was sent twice.
    const renames = fleet.reference.countsByOperation().updateHead ?? 0;
    expect(renames).toBeGreaterThanOrEqual(tally.byKind.write!.ok);
    expect(renames).toBeLessThanOrEqual(tally.byKind.write!.sent);
  });
});
