import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type ReferenceUpstream, startReferenceUpstream } from '../../src/reference-upstream/server.js';
import { type ActiveAlert, type PrometheusProcess, startPrometheus } from '../support/prometheus.js';
import { describeWithWatchedFleet } from '../support/services.js';
import { until } from '../support/until.js';
import { recordFigures } from './figures.js';
import { type Fleet, startFleet } from './fleet.js';

/*
 * Scenario h: the fleet watched by a real Prometheus (Debian's) that scrapes the three gateways' admin ports every
 * second and evaluates the shipped rules (deploy/prometheus/gateway.rules.yml) as often, under a steady trickle of
 * reads through HAProxy. A route that fails fires the breaker alert naming that route, and no other; the upstream
 * stopped fires the unreachable alert; each within its `for` and an evaluation, and each resolves once the fault
 * is gone.
 */

const EVALUATION_MS = 1_000;
/**
 * From the fault to the alert's condition in a scrape: the breaker opens on its failures, or /ready's next probe of the
 * upstream (at most 5 s after the last, HAProxy asking every 250 ms) finds it gone; the next scrape sees it.
 */
const SEEN_WITHIN_MS = 10_000;

describeWithWatchedFleet('the fleet watched by Prometheus with the shipped rules', () => {
  let fleet: Fleet;
  let prometheus: PrometheusProcess;
  let reference: ReferenceUpstream;
  let stopped = false;
  let load: Promise<void>;

  beforeAll(async () => {
    fleet = await startFleet();
    reference = fleet.reference;
    prometheus = await startPrometheus(fleet.gateways.map((gateway) => new URL(gateway.admin).host));
    const id = reference.store.headIds()[0]!;
    const read = (query: string) =>
      fetch(fleet.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query }),
      }).then(
        (response) => response.arrayBuffer(),
        () => undefined,
      );
    // About ten reads a second, over two routes: listHeads and getHeadById.
    load = (async () => {
      while (!stopped) {
        await Promise.all([read('{ heads(first: 2) { nodes { id } } }'), read(`{ head(id: "${id}") { name } }`)]);
        await sleep(200);
      }
    })();
  });
  afterAll(async () => {
    stopped = true;
    await load;
    await prometheus?.stop();
    await fleet?.close();
    if (reference !== fleet?.reference) await reference?.close();
  });

  /** The alerts named `name` in `state`, polled every 250 ms until there are `count` (for `gone`: none at all). */
  async function waitForAlerts(name: string, state: ActiveAlert['state'] | 'gone', limitMs: number, count = 1) {
    let found: ActiveAlert[] = [];
    await until(
      async () => {
        const alerts = (await prometheus.alerts()).filter((alert) => alert.labels.alertname === name);
        found = alerts.filter((alert) => alert.state === state);
        return state === 'gone' ? alerts.length === 0 : found.length >= count;
      },
      `${name} ${state}`,
      limitMs,
      250,
    );
    return found;
  }

  it('a failing route fires the breaker alert naming that route and no other, within its `for` and an evaluation, and it resolves once the route answers', async () => {
    const forMs = 120_000;
    const faulted = performance.now();
    // Every call of the route fails until cleared.
    reference.injectFault('listHeads', { kind: 'status', status: 500 }, 1_000_000);
    const firing = await waitForAlerts('GatewayUpstreamBreakerOpen', 'firing', forMs + SEEN_WITHIN_MS + 20_000);
    const fired = performance.now() - faulted;
    expect(fired).toBeGreaterThanOrEqual(forMs);
    expect(fired).toBeLessThanOrEqual(forMs + EVALUATION_MS + SEEN_WITHIN_MS);
    const named = new Set(
      (await prometheus.alerts())
        .filter((alert) => alert.labels.alertname === 'GatewayUpstreamBreakerOpen')
        .map((alert) => alert.labels.operation),
    );
    expect([...named]).toEqual(['listHeads']);
    expect(firing.length).toBeGreaterThan(0);
    const cleared = performance.now();
    reference.clearFaults();
    await waitForAlerts('GatewayUpstreamBreakerOpen', 'gone', 60_000);
    recordFigures('alerts: a failing route', {
      'GatewayUpstreamBreakerOpen (for 2m) firing after the fault, s': Math.round(fired / 100) / 10,
      'replicas whose alert fired': firing.length,
      'routes named': [...named],
      'resolved after the route answered again, s': Math.round((performance.now() - cleared) / 100) / 10,
    });
  }, 300_000);

  it('the upstream stopped fires the unreachable alert within its `for` and an evaluation, and it resolves once it is back', async () => {
    const forMs = 60_000;
    const { port } = new URL(reference.url);
    const down = performance.now();
    await reference.close();
    // Every replica: the one whose breaker the trickle opened, and those that see it only by /ready's probe.
    const replicas = fleet.gateways.length;
    const firing = await waitForAlerts(
      'GatewayUpstreamUnreachable',
      'firing',
      forMs + SEEN_WITHIN_MS + 20_000,
      replicas,
    );
    const fired = performance.now() - down;
    expect(fired).toBeGreaterThanOrEqual(forMs);
    expect(fired).toBeLessThanOrEqual(forMs + EVALUATION_MS + SEEN_WITHIN_MS);
    expect(firing.map((alert) => alert.labels.instance).sort()).toEqual(
      fleet.gateways.map((gateway) => new URL(gateway.admin).host).sort(),
    );
    const back = performance.now();
    reference = await startReferenceUpstream({ port: Number(port), record: false });
    await waitForAlerts('GatewayUpstreamUnreachable', 'gone', 60_000);
    recordFigures('alerts: the upstream stopped', {
      'GatewayUpstreamUnreachable (for 1m) firing after the stop, s': Math.round(fired / 100) / 10,
      'replicas whose alert fired': firing.length,
      'resolved after the upstream was back, s': Math.round((performance.now() - back) / 100) / 10,
    });
  }, 300_000);
});
