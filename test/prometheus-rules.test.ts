import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { type GatewayProcess, startGatewayProcess } from './support/process.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithPromtool, describeWithRedis, requireProgram } from './support/services.js';
import { until } from './support/until.js';

/*
 * The alert rules and objectives operators load (deploy/prometheus/gateway.rules.yml) and the dashboards they look at
 * (deploy/grafana/dashboards/): checked and unit-tested by Prometheus's own promtool, each alert's runbook a section of
 * docs/runbooks.md, and every series and label they name one a real gateway exports.
 */

const RULES = 'deploy/prometheus/gateway.rules.yml';
const RULE_TESTS = 'deploy/prometheus/tests/gateway.rules.test.yml';
/** compose.yaml's Prometheus: it scrapes every replica and loads RULES. */
const PROMETHEUS = 'deploy/prometheus/prometheus.yml';
const RUNBOOKS = 'docs/runbooks.md';
const RUNBOOK_URL = 'https://github.com/avatar-head-gateway/avatar-head-gateway/blob/main/docs/runbooks.md';

interface Rule {
  readonly alert?: string;
  readonly record?: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap(
  (group) => group.rules,
);
const alerts = rules.filter((rule) => rule.alert !== undefined);

const DASHBOARDS = 'deploy/grafana/dashboards';
/** Grafana's variables as a query is sent: a range for the rate interval, a job, every instance. */
const grafanaVariables: Record<string, string> = {
  __rate_interval: '5m',
  __interval: '1m',
  job: 'gateway',
  instance: '.*',
};
interface Panel {
  readonly title?: string;
  readonly targets?: { readonly expr?: string }[];
  readonly panels?: Panel[];
}
const panelsOf = (panels: readonly Panel[]): Panel[] =>
  panels.flatMap((panel) => [panel, ...panelsOf(panel.panels ?? [])]);
/** Every query of every dashboard panel, its variables substituted, named by its dashboard and panel. */
const dashboardQueries = readdirSync(DASHBOARDS, { withFileTypes: true })
  .filter((entry) => entry.name.endsWith('.json'))
  .flatMap((entry) => {
    const dashboard = JSON.parse(readFileSync(join(DASHBOARDS, entry.name), 'utf8')) as { panels: Panel[] };
    return panelsOf(dashboard.panels).flatMap((panel) =>
      (panel.targets ?? []).flatMap(({ expr }) =>
        expr === undefined
          ? []
          : [
              {
                name: `${entry.name}: ${panel.title}`,
                expr: expr.replace(
                  /\$\{?(\w+)(?::\w+)?\}?/g,
                  (_, name: string) => grafanaVariables[name] ?? `<${name}>`,
                ),
              },
            ],
      ),
    );
  });

/** A heading's anchor as GitHub makes it: lower case, spaces to hyphens, other punctuation dropped. */
const anchorOf = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, '')
    .replace(/ /g, '-');

describeWithPromtool("the alert rules, by Prometheus's own tools", () => {
  it('promtool finds the rules well formed and every unit test of theirs passes', () => {
    const promtool = requireProgram('promtool');
    expect(execFileSync(promtool, ['check', 'rules', RULES], { encoding: 'utf8' })).toContain(
      'SUCCESS: 19 rules found',
    );
    expect(execFileSync(promtool, ['test', 'rules', RULE_TESTS], { encoding: 'utf8' })).toContain('SUCCESS');
  });

  it("compose's Prometheus configuration is well formed, its rule files with it", () => {
    expect(execFileSync(requireProgram('promtool'), ['check', 'config', PROMETHEUS], { encoding: 'utf8' })).toContain(
      'SUCCESS: 1 rule files found',
    );
  });

  it("every dashboard panel's query is PromQL Prometheus parses", () => {
    expect(dashboardQueries.length).toBeGreaterThan(10);
    // Each as a recording rule: `promtool check rules` parses its expression.
    const folder = mkdtempSync(join(tmpdir(), 'dashboard-queries-'));
    try {
      const file = join(folder, 'queries.yml');
      const queries = dashboardQueries.map(({ expr }, i) => ({ record: `dashboard:query_${i}`, expr }));
      writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard-queries', rules: queries }] }));
      const checked = execFileSync(requireProgram('promtool'), ['check', 'rules', file], { encoding: 'utf8' });
      expect(checked).toContain(`SUCCESS: ${queries.length} rules found`);
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('the unit tests try every alert, each firing and, before its `for` or elsewhere, not', () => {
    const tests = (parse(readFileSync(RULE_TESTS, 'utf8')) as { tests: { alert_rule_test?: AlertTest[] }[] }).tests;
    type AlertTest = { alertname: string; exp_alerts: unknown[] };
    const tried = tests.flatMap((test) => test.alert_rule_test ?? []);
    for (const { alert } of alerts) {
      const of = tried.filter((test) => test.alertname === alert);
      expect(
        of.some((test) => test.exp_alerts.length > 0),
        `${alert} fires in a test`,
      ).toBe(true);
      expect(
        of.some((test) => test.exp_alerts.length === 0),
        `${alert} is held quiet in a test`,
      ).toBe(true);
    }
  });
});

describe('the alerts', () => {
  const headings = readFileSync(RUNBOOKS, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('## '))
    .map((line) => line.slice(3));

  it("each links its own section of docs/runbooks.md, and each section is an alert's", () => {
    expect(alerts.map((rule) => rule.annotations?.runbook_url)).toEqual(
      alerts.map((rule) => `${RUNBOOK_URL}#${anchorOf(rule.alert!)}`),
    );
    expect(headings.map(anchorOf).sort()).toEqual(alerts.map((rule) => anchorOf(rule.alert!)).sort());
  });

  it('each says in its name what it is about, has a severity, a summary and a row in the runbooks table', () => {
    const table = readFileSync(RUNBOOKS, 'utf8');
    for (const { alert, labels, annotations } of alerts) {
      expect(alert).toMatch(/^Gateway(Upstream|Availability|Latency|Load|Redis|Subscriptions|NotReady|Restarting)/);
      expect(['page', 'warning'], alert).toContain(labels?.severity);
      expect(annotations?.summary, alert).toBeTruthy();
      expect(table, alert).toContain(`| \`${alert}\` |`);
    }
  });
});

/** The series and labels an expression names (recording rules' own names and PromQL's words aside). */
function namesIn(expr: string): { series: string[]; labels: string[] } {
  const series = [...expr.matchAll(/\b(?:gateway|process|nodejs)_[a-z0-9_]+\b/g)].map((match) => match[0]);
  const grouped = [...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((match) =>
    match[1]!.split(',').map((label) => label.trim()),
  );
  const matched = [...expr.matchAll(/([a-z_]+)\s*(?:=~|!~|!=|=)\s*"/g)].map((match) => match[1]!);
  return { series: [...new Set(series)], labels: [...new Set([...grouped, ...matched])] };
}

/** One sample line's name and label names. */
function sampleOf(line: string): { name: string; labels: string[] } {
  const [, name, labels = ''] = /^([\w:]+)(?:\{(.*)\})? /.exec(line)!;
  return { name: name!, labels: [...labels.matchAll(/(\w+)="/g)].map((match) => match[1]!) };
}

describeWithRedis('the series the rules name', { timeout: 60_000 }, () => {
  let redis: RedisProcess;
  let reference: ReferenceUpstream;
  let gateway: GatewayProcess;
  let exported: Map<string, Set<string>>;

  const post = (query: string) =>
    fetch(gateway.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
      body: JSON.stringify({ query }),
    }).then((response) => response.json() as Promise<{ errors?: { extensions: { code: string } }[] }>);

  beforeAll(async () => {
    redis = await startRedis();
    reference = await startReferenceUpstream();
    gateway = await startGatewayProcess({
      UPSTREAM_URL: reference.url,
      REDIS_URL: redis.url,
      RESPONSE_CACHE_TTL_MS: '60000',
      LOG_LEVEL: 'error',
    });
    // What a day brings: answers (looked up in the response cache), a client's error, a refused document, an upstream
    // fault, a mutation, Redis lost.
    expect((await post('{ heads(first: 2) { nodes { id name } } }')).errors).toBeUndefined();
    const missing = await post('{ head(id: "0b1ab1e5-0000-4000-8000-000000000000") { name } }');
    expect(missing.errors?.[0]?.extensions.code).toBe('NOT_FOUND');
    const aliases = Array.from({ length: 40 }, (_, i) => `a${i}: __typename`).join(' ');
    expect((await post(`{ ${aliases} }`)).errors?.[0]?.extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    reference.injectFault('listHeads', { kind: 'status', status: 500 }, 1);
    expect((await post('{ heads(first: 1) { nodes { id } } }')).errors?.[0]?.extensions.code).toBe('UPSTREAM_ERROR');
    const id = reference.store.headIds()[0]!;
    await post(`mutation { updateHead(input: { id: "${id}", name: "renamed" }) { head { id } } }`);
    await redis.stop();
    const scrape = async () => (await fetch(new URL('/metrics', gateway.endpoint))).text();
    await until(async () => {
      await post('{ heads(first: 1) { nodes { id } } }');
      return (await scrape()).includes('gateway_shared_state_fallbacks_total{');
    }, 'a call Redis did not take, counted');
    const text = await scrape();
    exported = new Map();
    for (const line of text.split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const { name, labels } = sampleOf(line);
      const known = exported.get(name) ?? new Set<string>();
      for (const label of labels) known.add(label);
      exported.set(name, known);
    }
  }, 60_000);
  afterAll(async () => {
    gateway?.kill();
    await reference?.close();
    await redis?.stop();
  });

  it("are all exported by a gateway, with every label a rule or a dashboard's query groups or matches by", () => {
    // What Prometheus adds to every series it scrapes.
    const added = new Set(['job', 'instance']);
    const missing: string[] = [];
    const named = [...rules.map((rule) => ({ name: rule.alert ?? rule.record, expr: rule.expr })), ...dashboardQueries];
    for (const { name, expr } of named) {
      const { series, labels } = namesIn(expr);
      for (const one of series) if (!exported.has(one)) missing.push(`${name}: ${one}`);
      for (const label of labels) {
        const carried = series.some((one) => exported.get(one)?.has(label));
        if (!added.has(label) && !carried) missing.push(`${name}: label ${label} on none of ${series.join(', ')}`);
      }
    }
    expect(missing).toEqual([]);
    // The check sees what it must: a rule naming a series or a label the gateway lacks is caught.
    expect(namesIn('sum by (job, route) (rate(gateway_upstream_calls_total{stage="x"}[5m]))')).toEqual({
      series: ['gateway_upstream_calls_total'],
      labels: ['job', 'route', 'stage'],
    });
    expect(exported.has('gateway_upstream_calls_total')).toBe(false);
  });
});
