import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { defaultTracingSettings, loadConfig } from '../src/config.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { HeadShape } from '../src/reference-upstream/store.js';
import { operationNamesOf } from '../src/server/documents/trusted-documents.js';
import { createLogger } from '../src/server/instruments/logger.js';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import { createReadiness, upstreamAnswers } from '../src/server/probes/readiness.js';
import { faultOf, operationLabel, outcomeOf } from '../src/server/telemetry/operation-outcome.js';
import { OperationRecorder } from '../src/server/telemetry/operation-telemetry.js';
import { createTracing } from '../src/telemetry/tracing.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { until } from './support/until.js';

interface OperationLog {
  level: number;
  msg: string;
  requestId: string;
  traceId: string;
  operationName: string;
  operationType: string;
  outcome: string;
  durationMs: number;
  upstreamCalls: number;
  errorCodes: string[];
}

/** One Prometheus sample: `name{a="b",...} value`. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`unreadable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample of `name` whose labels include `labels`; 0 when there is none yet. */
function sampleValue(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value ?? 0;
}

let f: TestGateway;

const post = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  f.gateway.fetch('http://gateway/graphql', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      ...headers,
    },
    body: JSON.stringify(body),
  });
const get = (path: string, headers: Record<string, string> = {}) =>
  f.gateway.fetch(`http://gateway${path}`, { headers });
const scrape = async () => parseMetrics(await (await get('/metrics')).text());
const operationLogs = (): OperationLog[] =>
  f.logLines.map((line) => JSON.parse(line) as OperationLog).filter((entry) => entry.msg === 'graphql operation');
/** Runs `action` and returns the operation log lines it wrote. */
async function logsOf(action: () => unknown): Promise<OperationLog[]> {
  const before = operationLogs().length;
  await action();
  return operationLogs().slice(before);
}

/** One query named `name`, recorded as the telemetry stage records it. */
function recordOperation(recorder: OperationRecorder, name: string): void {
  const record = recorder.begin(ROOT_CONTEXT, name);
  record.type = 'query';
  recorder.finish({ requestId: 'recorded', client: undefined }, record, 0, { data: { __typename: 'Query' } });
}

const manyAliases = `query TooManyAliases { ${Array.from({ length: 40 }, (_, i) => `a${i}: heads(first: 1) { totalCount }`).join(' ')} }`;
const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

beforeAll(async () => {
  // Every operation logged (OPERATION_LOG=all), so each test can read its line; the default
  // (failures and slow operations) has its own block below.
  f = await startTestGateway({ env: { OPERATION_LOG: 'all' } });
});

afterAll(() => f.close());

beforeEach(() => {
  f.reference.clearFaults();
  f.reference.resetRecording();
});

describe('/health', () => {
  it('answers 200 {"status":"ok"} as JSON without touching the upstream', async () => {
    const response = await get('/health');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await response.json()).toEqual({ status: 'ok' });
    expect(f.reference.requests).toHaveLength(0);
  });

  it('answers by its path whatever the query string, even one ending in the GraphQL endpoint', async () => {
    const logs = await logsOf(async () => {
      for (const path of ['/health?probe=/graphql', '/metrics?x=/graphql'])
        expect((await get(path)).status, path).toBe(200);
      expect(await (await get('/health?probe=/graphql')).json()).toEqual({ status: 'ok' });
    });
    expect(logs).toEqual([]);
  });
});

describe('/ready', () => {
  // The gateway as main.ts builds it, so the cache period is the readiness default (5 s). The
  // cache reads Date's clock: a fake one (faked before the gateway is built) steps it exactly.
  // Each test builds its own gateway: one of them stops the upstream.
  let current: TestGateway | undefined;
  let start: number;
  const startReadyGateway = async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    start = Date.now();
    current = await startTestGateway();
    return current;
  };
  const ready = (on: TestGateway) => on.gateway.fetch('http://gateway/ready');
  const statusAt = async (on: TestGateway, ms: number) => {
    vi.setSystemTime(start + ms);
    return (await ready(on)).status;
  };

  afterEach(async () => {
    vi.useRealTimers();
    await current?.close();
    current = undefined;
  });

  it('answers 200 while the upstream answers, asking it once per 5 s however many probes come', async () => {
    const r = await startReadyGateway();
    const first = await ready(r);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ status: 'ready' });
    expect(r.reference.requests.map((q) => q.operation)).toEqual(['listHeads']);
    expect(r.reference.requests[0]!.query).toEqual({ page: '1', size: '1' });
    // No token of any kind goes with the probe.
    expect(r.reference.requests[0]!.headers.authorization).toBeUndefined();

    expect(await statusAt(r, 4_999)).toBe(200);
    expect(r.reference.requests).toHaveLength(1);

    // 5 s after the answer the cache has expired: concurrent probes share one check.
    vi.setSystemTime(start + 5_000);
    const statuses = await Promise.all([ready(r), ready(r), ready(r)].map(async (p) => (await p).status));
    expect(statuses).toEqual([200, 200, 200]);
    expect(r.reference.requests).toHaveLength(2);
  });

  /** A gauge as a scrape reads it: its last answer, never a probe of its own. */
  const gauge = async (on: TestGateway, name: string) =>
    (await on.metrics.registry.getSingleMetric(name)!.get()).values[0]!.value;

  it('answers 503 {"status":"not ready"} once the upstream is gone and the cached answer expired; the gauges say so', async () => {
    const r = await startReadyGateway();
    expect(await statusAt(r, 0)).toBe(200);
    expect([await gauge(r, 'gateway_ready'), await gauge(r, 'gateway_upstream_answering')]).toEqual([1, 1]);
    await r.reference.close();
    // The answer of 0 still stands until 5 000.
    expect(await statusAt(r, 4_999)).toBe(200);
    vi.setSystemTime(start + 5_000);
    const response = await ready(r);
    expect(response.status).toBe(503);
    expect(await response.json()).toEqual({ status: 'not ready' });
    // With no traffic to open a breaker, the probe's answer is what the unreachable alert sees.
    expect([await gauge(r, 'gateway_ready'), await gauge(r, 'gateway_upstream_answering')]).toEqual([0, 0]);
    expect(r.reference.requests).toHaveLength(1);
    // Liveness is not readiness: the process still says it is alive.
    expect((await r.gateway.fetch('http://gateway/health')).status).toBe(200);
  });
});

describe('over real HTTP', () => {
  it('each answer carries its own length: /ready, /health and /metrics in turn on one server', async () => {
    const server = createServer(f.handler);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      for (const [path, body] of [
        ['/ready', '{"status":"ready"}'],
        ['/health', '{"status":"ok"}'],
        ['/ready', '{"status":"ready"}'],
        ['/health', '{"status":"ok"}'],
      ] as const) {
        const response = await fetch(base + path);
        expect(response.headers.get('content-length')).toBe(String(Buffer.byteLength(body)));
        expect(await response.text()).toBe(body);
      }
      const metrics = await fetch(`${base}/metrics`);
      const text = await metrics.text();
      expect(metrics.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
      expect(text).toContain('gateway_operations_in_flight');
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('upstreamAnswers', () => {
  // The probe's default timeout (800 ms) for answers that come; 200 ms where nothing ever comes.
  const answers = (timeoutMs?: number) => upstreamAnswers(f.upstream, timeoutMs === undefined ? {} : { timeoutMs })();

  it("counts any HTTP answer as an answer, 401, 422 and 5xx included (a failing route is its own breaker's business)", async () => {
    expect(await answers()).toBe(true);
    f.reference.injectFault('listHeads', { kind: 'status', status: 401, body: { detail: 'Not authenticated' } });
    expect(await answers()).toBe(true);
    f.reference.injectFault('listHeads', { kind: 'status', status: 422, body: { detail: [] } });
    expect(await answers()).toBe(true);
    f.reference.injectFault('listHeads', { kind: 'status', status: 500 });
    expect(await answers()).toBe(true);
    f.reference.injectFault('listHeads', { kind: 'status', status: 503 }, 3);
    expect(await answers()).toBe(true);
  });

  it('counts a dropped connection as not ready', async () => {
    f.reference.injectFault('listHeads', { kind: 'drop' }, 3);
    expect(await answers()).toBe(false);
  });

  it('gives up on a slow upstream by its own timeout, not by the call timeout (10 s by default)', async () => {
    // Held until the test releases it: only the probe's own timeout can end the wait.
    f.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    const before = await scrape();
    expect(await answers(200)).toBe(false);
    const attempts = async (status: string) =>
      sampleValue(await scrape(), 'gateway_upstream_call_duration_seconds_count', { operation: 'listHeads', status }) -
      sampleValue(before, 'gateway_upstream_call_duration_seconds_count', { operation: 'listHeads', status });
    // The probe cancelled its call (ABORTED, counted as the call ends, just after the probe's answer); the call's own
    // timeout would say UPSTREAM_TIMEOUT.
    await until(async () => (await attempts('ABORTED')) === 1, "the probe's cancelled attempt counted");
    expect(await attempts('UPSTREAM_TIMEOUT')).toBe(0);
    expect(f.reference.requests).toHaveLength(1);
    expect(f.reference.requests[0]!.status).toBeUndefined();
    await until(() => f.reference.inFlight() === 0, 'the cancelled probe leaves the upstream');
  });
});

describe('createReadiness', () => {
  it('caches the answer for cacheMs, shares a check in flight and counts a throwing check as not ready', async () => {
    let clock = 0;
    let calls = 0;
    let answer: boolean | Error = true;
    let release!: () => void;
    const check = async () => {
      calls++;
      await new Promise<void>((resolve) => (release = resolve));
      if (answer instanceof Error) throw answer;
      return answer;
    };
    const ready = createReadiness({ check, cacheMs: 1_000, now: () => clock });

    const concurrent = [ready(), ready(), ready()];
    release();
    expect(await Promise.all(concurrent)).toEqual([true, true, true]);
    expect(calls).toBe(1);

    clock = 999;
    expect(await ready()).toBe(true);
    expect(calls).toBe(1);

    clock = 1_000;
    answer = new Error('boom');
    const failing = ready();
    release();
    expect(await failing).toBe(false);
    expect(calls).toBe(2);

    clock = 1_500;
    expect(await ready()).toBe(false);
    expect(calls).toBe(2);

    clock = 2_000;
    answer = true;
    const recovered = ready();
    release();
    expect(await recovered).toBe(true);
    expect(calls).toBe(3);
  });
});

describe('/metrics', () => {
  it('serves the registry as Prometheus text with its content type', async () => {
    const response = await get('/metrics');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe(f.metrics.registry.contentType);
    const text = await response.text();
    expect(text).toContain('# TYPE gateway_operation_duration_seconds histogram');
    expect(text).toContain('# TYPE gateway_operations_in_flight gauge');
    expect(f.reference.requests).toHaveLength(0);
  });

  it('records a named query by name, type and outcome, and its upstream calls by operation and status', async () => {
    const before = await scrape();
    const response = await post({
      query: 'query HeadsPage { heads(first: 2) { nodes { name } } }',
      operationName: 'HeadsPage',
    });
    expect(response.status).toBe(200);
    const after = await scrape();
    const labels = { operation: 'HeadsPage', type: 'query', outcome: 'ok' };
    const count = 'gateway_operation_duration_seconds_count';
    expect(sampleValue(after, count, labels) - sampleValue(before, count, labels)).toBe(1);
    expect(sampleValue(after, 'gateway_operation_duration_seconds_bucket', { ...labels, le: '+Inf' })).toBe(
      sampleValue(after, count, labels),
    );
    const call = { operation: 'listHeads', status: '200' };
    expect(
      sampleValue(after, 'gateway_upstream_call_duration_seconds_count', call) -
        sampleValue(before, 'gateway_upstream_call_duration_seconds_count', call),
    ).toBe(f.reference.requests.filter((q) => q.operation === 'listHeads').length);
    expect(sampleValue(after, 'gateway_operations_in_flight')).toBe(0);
  });

  it('counts the retry after an upstream 503 and the 503 attempt itself', async () => {
    const before = await scrape();
    f.reference.injectFault('listHeads', { kind: 'status', status: 503 });
    const logs = await logsOf(async () => {
      const response = await post({ query: 'query RetriedHeads { heads(first: 1) { nodes { id } } }' });
      expect((await response.json()).errors).toBeUndefined();
    });
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) =>
      sampleValue(after, name, labels) - sampleValue(before, name, labels);
    expect(delta('gateway_upstream_retries_total', { operation: 'listHeads' })).toBe(1);
    expect(delta('gateway_upstream_call_duration_seconds_count', { operation: 'listHeads', status: '503' })).toBe(1);
    expect(delta('gateway_upstream_call_duration_seconds_count', { operation: 'listHeads', status: '200' })).toBe(1);
    expect(
      delta('gateway_operation_duration_seconds_count', { operation: 'RetriedHeads', type: 'query', outcome: 'ok' }),
    ).toBe(1);
    // Both attempts count against the operation, as the upstream saw them.
    expect(logs).toHaveLength(1);
    expect(logs[0]!.upstreamCalls).toBe(2);
    expect(f.reference.requests).toHaveLength(2);
  });

  it('counts a refusal by its limit and the operation as refused, with no upstream call', async () => {
    const before = await scrape();
    const response = await post({ query: manyAliases });
    const body = (await response.json()) as { data?: unknown; errors?: unknown[] };
    expect(body.data).toBeUndefined();
    expect(body.errors?.length).toBeGreaterThan(0);
    const after = await scrape();
    expect(
      sampleValue(after, 'gateway_refusals_total', { limit: 'aliases' }) -
        sampleValue(before, 'gateway_refusals_total', { limit: 'aliases' }),
    ).toBe(1);
    const labels = { operation: 'TooManyAliases', type: 'query', outcome: 'refused' };
    expect(
      sampleValue(after, 'gateway_operation_duration_seconds_count', labels) -
        sampleValue(before, 'gateway_operation_duration_seconds_count', labels),
    ).toBe(1);
    expect(f.reference.requests).toHaveLength(0);
    expect(sampleValue(after, 'gateway_operations_in_flight')).toBe(0);
  });

  it("counts the operations the availability objective counts as bad: an upstream's or the gateway's fault, never a client's", async () => {
    const faults = (samples: Sample[]) =>
      Object.fromEntries(
        samples
          .filter((s) => s.name === 'gateway_operation_faults_total')
          .map((s) => [`${s.labels.type}/${s.labels.fault}`, s.value]),
      );
    const before = await scrape();
    // Every series from the start, at 0: a rate over it has a beginning.
    expect(Object.keys(faults(before)).sort()).toEqual([
      'mutation/gateway',
      'mutation/upstream',
      'query/gateway',
      'query/upstream',
    ]);
    // A client's own: a head that does not exist, a document over a limit.
    const missing = await post({ query: '{ head(id: "0b1ab1e5-0000-4000-8000-000000000000") { name } }' });
    expect((await missing.json()).errors[0].extensions.code).toBe('NOT_FOUND');
    await post({ query: manyAliases });
    // The upstream's: a 500.
    f.reference.injectFault('listHeads', { kind: 'status', status: 500 });
    const failed = await post({ query: '{ heads(first: 1) { nodes { id } } }' });
    expect((await failed.json()).errors[0].extensions.code).toBe('UPSTREAM_ERROR');
    const after = await scrape();
    const delta = (key: string) => (faults(after)[key] ?? 0) - (faults(before)[key] ?? 0);
    expect(['query/upstream', 'query/gateway', 'mutation/upstream'].map(delta)).toEqual([1, 0, 0]);
    expect(faultOf([{ extensions: { code: 'INTERNAL_SERVER_ERROR' } }, { extensions: { code: 'NOT_FOUND' } }])).toBe(
      'gateway',
    );
    expect(faultOf([{ extensions: { code: 'OVERLOADED' } }, { extensions: { code: 'UPSTREAM_TIMEOUT' } }])).toBe(
      'upstream',
    );
    expect(faultOf([{ extensions: { code: 'RATE_LIMITED' } }, { extensions: { code: 'BAD_USER_INPUT' } }])).toBe(
      undefined,
    );
  });

  it('keeps operation labels short and plain whatever name the client sends', async () => {
    const sent = `Évil-name{x="y"}\n${'Z'.repeat(100)}`;
    const logs = await logsOf(() =>
      post({ query: 'query A { __typename } query B { __typename }', operationName: sent }),
    );
    const label = logs[0]!.operationName;
    expect(label).toMatch(/^\w{1,64}$/);
    expect(label).toBe(operationLabel(sent));
    const samples = await scrape();
    const names = new Set(
      samples.filter((s) => s.name === 'gateway_operation_duration_seconds_count').map((s) => s.labels.operation),
    );
    expect(names).toContain(label);
    for (const name of names) expect(name).toMatch(/^\w{1,64}$/);
  });

  it('counts names past maxOperationNames as "other", so clients cannot grow the series without bound', async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const recorder = new OperationRecorder({
      metrics,
      logger: createLogger({ level: 'silent' }),
      tracing: createTracing(defaultTracingSettings),
      maxOperationNames: 2,
    });
    for (const name of ['First', 'Second', 'Third', 'Fourth', 'First']) recordOperation(recorder, name);
    const samples = parseMetrics(await metrics.registry.metrics()).filter(
      (s) => s.name === 'gateway_operation_duration_seconds_count',
    );
    expect(Object.fromEntries(samples.map((s) => [s.labels.operation, s.value]))).toEqual({
      First: 2,
      Second: 1,
      other: 2,
    });
  });

  it('with a trusted-documents manifest keeps its operation names apart whatever came first; the others share the bounded pool', async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const operationNames = operationNamesOf(
      loadConfig({ TRUSTED_DOCUMENTS_FILE: 'src/generated/persisted-documents.json' }).persistedDocuments
        .trustedDocuments!,
    );
    expect(operationNames).toContain('HeadWithHair');
    const recorder = new OperationRecorder({
      metrics,
      logger: createLogger({ level: 'silent' }),
      tracing: createTracing(defaultTracingSettings),
      operationNames,
      maxOperationNames: 500,
    });
    // 600 made-up names first: before, the first 500 names seen took every label.
    for (const name of [...Array.from({ length: 600 }, (_, i) => `Spam${i}`), 'HeadWithHair', 'HeadsPage'])
      recordOperation(recorder, name);
    const samples = parseMetrics(await metrics.registry.metrics()).filter(
      (s) => s.name === 'gateway_operation_duration_seconds_count',
    );
    const counts = Object.fromEntries(samples.map((s) => [s.labels.operation, s.value]));
    expect(counts).toMatchObject({ Spam0: 1, Spam499: 1, other: 100, HeadWithHair: 1, HeadsPage: 1 });
    expect(Object.keys(counts)).toHaveLength(500 + 3);
  });

  it('METRICS_OPERATION_NAMES sets how many names, first seen, are kept apart; a manifest sets which', async () => {
    const counts = async (env: Record<string, string>) => {
      const t = await startTestGateway({ env });
      try {
        for (const name of ['One', 'HeadWithHair', 'Three']) await t.execute(`query ${name} { __typename }`);
        const samples = parseMetrics(await t.metrics.registry.metrics()).filter(
          (s) => s.name === 'gateway_operation_duration_seconds_count',
        );
        return Object.fromEntries(samples.map((s) => [s.labels.operation, s.value]));
      } finally {
        await t.close();
      }
    };
    expect(await counts({ METRICS_OPERATION_NAMES: '1' })).toEqual({ One: 1, other: 2 });
    expect(
      await counts({ METRICS_OPERATION_NAMES: '1', TRUSTED_DOCUMENTS_FILE: 'src/generated/persisted-documents.json' }),
    ).toEqual({ One: 1, HeadWithHair: 1, other: 1 });
    // An operator's names are kept apart as the manifest's are, whatever came first.
    expect(await counts({ METRICS_OPERATION_NAMES: '1', METRICS_KNOWN_OPERATIONS: 'Three' })).toEqual({
      One: 1,
      Three: 1,
      other: 1,
    });
  });

  it('hands queued observations over at a scrape, each once, dropping one prom-client refuses without failing the scrape', async () => {
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const labels = { operation: 'Queued', type: 'query', outcome: 'ok' } as const;
    metrics.operations.observe(labels, 0.01);
    metrics.operations.observe(labels, Number.NaN);
    metrics.operations.observe(labels, 0.02);
    const count = async () =>
      sampleValue(parseMetrics(await metrics.scrape()), 'gateway_operation_duration_seconds_count', {
        operation: 'Queued',
      });
    expect(await count()).toBe(2);
    expect(await count()).toBe(2);
    metrics.operations.observe(labels, 0.03);
    expect(await count()).toBe(3);
  });

  it('shows an operation in flight while it waits on the upstream', async () => {
    f.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    const slow = post({ query: 'query Slow { heads(first: 1) { nodes { id } } }' });
    await until(() => f.reference.inFlight() === 1, 'the listing held at the upstream');
    expect(sampleValue(await scrape(), 'gateway_operations_in_flight')).toBe(1);
    expect(f.reference.releaseHeld()).toBe(1);
    expect((await slow).status).toBe(200);
    expect(sampleValue(await scrape(), 'gateway_operations_in_flight')).toBe(0);
  });
});

describe('one log line per operation', () => {
  it('names the operation, its type, outcome, duration and the upstream calls it made', async () => {
    const ids = f.reference.store.headIds();
    const withHair = ids.find(
      (id) => (f.reference.store.project(f.reference.store.findHead(id)!, HeadShape.A_EXT) as { hair?: unknown }).hair,
    )!;
    expect(withHair).toBeDefined();
    let requestId: string | null = null;
    const logs = await logsOf(async () => {
      // No operationName parameter: the name comes from the document.
      const response = await post({
        query: 'query HeadWithHair($id: ID!) { head(id: $id) { name hair { name hairMetadata } } }',
        variables: { id: withHair },
      });
      requestId = response.headers.get('x-request-id');
      expect((await response.json()).errors).toBeUndefined();
    });
    expect(logs).toHaveLength(1);
    const [line] = logs;
    expect(line).toMatchObject({
      level: 30,
      requestId,
      operationName: 'HeadWithHair',
      operationType: 'query',
      outcome: 'ok',
      errorCodes: [],
    });
    expect(line!.upstreamCalls).toBe(f.reference.requests.length);
    expect(line!.upstreamCalls).toBeGreaterThan(0);
    expect(line!.durationMs).toBeGreaterThanOrEqual(0);
    expect(requestId).toMatch(uuidPattern);
  });

  it('reports a failed execution as error with its codes, a mutation as a mutation, an anonymous one as anonymous', async () => {
    f.reference.injectFault('listHeads', { kind: 'status', status: 500 });
    const failing = await logsOf(() => post({ query: '{ heads(first: 1) { totalCount } }' }));
    expect(failing).toHaveLength(1);
    expect(failing[0]).toMatchObject({
      operationName: 'anonymous',
      operationType: 'query',
      outcome: 'error',
      errorCodes: ['UPSTREAM_ERROR'],
      upstreamCalls: 1,
    });

    const password = `pw-${randomUUID()}`;
    const login = await logsOf(() =>
      post({
        query: 'mutation LogIn($input: LoginInput!) { login(input: $input) { accessToken } }',
        variables: { input: { username: DEMO_CREDENTIALS.username, password } },
      }),
    );
    expect(login).toHaveLength(1);
    expect(login[0]).toMatchObject({
      operationName: 'LogIn',
      operationType: 'mutation',
      outcome: 'error',
      upstreamCalls: 1,
    });
    expect(f.logLines.join('\n')).not.toContain(password);
  });

  it('logs refused operations too, with their request id and no upstream call', async () => {
    let header: string | null = null;
    const logs = await logsOf(async () => {
      const response = await post({ query: manyAliases }, { 'x-request-id': 'refused-1' });
      header = response.headers.get('x-request-id');
    });
    expect(header).toBe('refused-1');
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({
      requestId: 'refused-1',
      operationName: 'TooManyAliases',
      outcome: 'refused',
      upstreamCalls: 0,
    });
    expect(logs[0]!.errorCodes.length).toBeGreaterThan(0);

    const syntax = await logsOf(() => post({ query: '{ heads(' }));
    expect(syntax).toHaveLength(1);
    expect(syntax[0]).toMatchObject({
      operationName: 'anonymous',
      operationType: 'unknown',
      outcome: 'refused',
      upstreamCalls: 0,
    });

    // A request without a query is refused by the parameters' check (intake/params.ts), after our clock started.
    let missing: Response | undefined;
    const noQuery = await logsOf(async () => {
      missing = await post({ variables: {} }, { 'x-request-id': 'no-query' });
    });
    expect(missing!.status).toBe(400);
    expect(missing!.headers.get('x-request-id')).toBe('no-query');
    expect(noQuery).toHaveLength(1);
    expect(noQuery[0]).toMatchObject({ requestId: 'no-query', outcome: 'refused', upstreamCalls: 0 });
    expect(sampleValue(await scrape(), 'gateway_operations_in_flight')).toBe(0);
  });

  it("treats /graphql/, which is served as the endpoint too (http/paths.ts), as /graphql: the caller's trace, a refused body", async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const postSlash = (body: string, headers: Record<string, string>) =>
      f.gateway.fetch('http://gateway/graphql/', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    const served = await logsOf(() =>
      postSlash(JSON.stringify({ query: '{ __typename }' }), { traceparent: `00-${traceId}-00f067aa0ba902b7-01` }),
    );
    expect(served).toMatchObject([{ traceId, outcome: 'ok' }]);
    let refused: Response | undefined;
    const notJson = await logsOf(async () => {
      refused = await postSlash('{ not json', { 'x-request-id': 'slash-1' });
    });
    expect(refused!.status).toBe(400);
    expect(refused!.headers.get('x-request-id')).toBe('slash-1');
    expect(notJson).toMatchObject([{ requestId: 'slash-1', outcome: 'refused', upstreamCalls: 0 }]);
  });

  it('never carries the query text, the variables or an error message', async () => {
    const marker = `marker${randomUUID().replaceAll('-', '')}`;
    const logs = await logsOf(() =>
      post({
        query: `query Marked($search: String) { ${marker}: heads(first: 1, search: $search) { totalCount } }`,
        variables: { search: `${marker}-value` },
      }),
    );
    expect(logs).toHaveLength(1);
    expect(Object.keys(logs[0]!).sort()).toEqual([
      'durationMs',
      'errorCodes',
      'level',
      'msg',
      'operationName',
      'operationType',
      'outcome',
      'requestId',
      'spanId',
      'time',
      'traceId',
      'upstreamCalls',
    ]);
    expect(f.logLines.join('\n')).not.toContain(marker);
  });
});

describe('tokens', () => {
  it('never reach a log line or the metrics, whatever the request did', async () => {
    const secret = `secret-${randomUUID()}`;
    const auth = { authorization: `Bearer ${secret}` };
    await post({ query: 'query WithToken { heads(first: 1) { nodes { id } } }' }, auth);
    await post({ query: '{ permissions(first: 1) { totalCount } }' }, auth); // upstream 401
    await post({ query: manyAliases }, auth); // refused
    await post({ query: '{ heads(' }, auth); // syntax error
    f.reference.injectFault('listHeads', { kind: 'status', status: 500 });
    await post({ query: '{ heads(first: 1) { totalCount } }' }, auth); // upstream failure
    await get('/ready', auth);
    await get('/health', auth);
    const metricsText = await (await get('/metrics', auth)).text();
    // The token did travel: the upstream got it.
    expect(f.reference.requests.some((q) => q.headers.authorization === `Bearer ${secret}`)).toBe(true);
    expect(f.logLines.length).toBeGreaterThan(0);
    expect(f.logLines.join('\n')).not.toContain(secret);
    expect(metricsText).not.toContain(secret);
  });
});

describe('which operations are logged', () => {
  const linesOf = (t: TestGateway) =>
    t.logLines.map((line) => JSON.parse(line) as OperationLog).filter((entry) => entry.msg === 'graphql operation');
  const withGateway = async (env: Record<string, string>, run: (t: TestGateway) => Promise<void>) => {
    const t = await startTestGateway({ env });
    try {
      await run(t);
    } finally {
      await t.close();
    }
  };

  it('by default, failures and slow operations only: a success has no line, a refusal and an upstream failure have theirs', async () => {
    await withGateway({}, async (t) => {
      await t.execute('query Fine { heads(first: 1) { totalCount } }');
      expect(linesOf(t)).toEqual([]);
      await t.execute('query Wrong { heads(first: 1) { noSuchField } }');
      t.reference.injectFault('listHeads', { kind: 'status', status: 500 });
      await t.execute('query Broken { heads(first: 1) { totalCount } }');
      expect(linesOf(t).map((line) => [line.operationName, line.outcome])).toEqual([
        ['Wrong', 'refused'],
        ['Broken', 'error'],
      ]);
      // The metrics count every operation, logged or not.
      const samples = parseMetrics(await t.metrics.registry.metrics()).filter(
        (sample) => sample.name === 'gateway_operation_duration_seconds_count',
      );
      expect(Object.fromEntries(samples.map((sample) => [sample.labels.operation, sample.value]))).toEqual({
        Fine: 1,
        Wrong: 1,
        Broken: 1,
      });
    });
  });

  it('OPERATION_LOG_SLOW_MS: a success that took at least that long has its line', async () => {
    await withGateway({ OPERATION_LOG_SLOW_MS: '0' }, async (t) => {
      await t.execute('query Fine { heads(first: 1) { totalCount } }');
      expect(linesOf(t).map((line) => [line.operationName, line.outcome])).toEqual([['Fine', 'ok']]);
    });
  });

  it("OPERATION_LOG=off: no operation line, not even a refusal's", async () => {
    await withGateway({ OPERATION_LOG: 'off' }, async (t) => {
      await t.execute('query Wrong { heads(first: 1) { noSuchField } }');
      expect(linesOf(t)).toEqual([]);
    });
  });
});

describe('x-request-id', () => {
  it('echoes a sane incoming id, and the upstream and the log line carry the same one', async () => {
    const logs = await logsOf(async () => {
      const response = await post({ query: '{ heads(first: 1) { totalCount } }' }, { 'x-request-id': 'trace-42.a:b' });
      expect(response.headers.get('x-request-id')).toBe('trace-42.a:b');
    });
    expect(logs[0]!.requestId).toBe('trace-42.a:b');
    expect(f.reference.requests.map((q) => q.headers['x-request-id'])).toEqual(['trace-42.a:b']);
  });

  it('generates one when none or an unusable one comes, the same as the log line and the upstream see', async () => {
    for (const headers of [{}, { 'x-request-id': 'has spaces and\ttabs' }] as Record<string, string>[]) {
      f.reference.resetRecording();
      let echoed: string | null = null;
      const logs = await logsOf(async () => {
        echoed = (await post({ query: '{ heads(first: 1) { totalCount } }' }, headers)).headers.get('x-request-id');
      });
      expect(echoed).toMatch(uuidPattern);
      expect(logs[0]!.requestId).toBe(echoed);
      expect(f.reference.requests[0]!.headers['x-request-id']).toBe(echoed);
    }
  });
});

describe('outcomeOf', () => {
  it('ok without errors, error with data, refused without data, error for a crash without data', () => {
    expect(outcomeOf({ data: { a: 1 } })).toBe('ok');
    expect(outcomeOf({ data: { a: null }, errors: [{ extensions: { code: 'UPSTREAM_ERROR' } }] })).toBe('error');
    expect(outcomeOf({ data: null, errors: [{ extensions: { code: 'UPSTREAM_ERROR' } }] })).toBe('error');
    expect(outcomeOf({ errors: [{ extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] })).toBe('refused');
    expect(outcomeOf({ errors: [{ extensions: { code: 'INTERNAL_SERVER_ERROR' } }] })).toBe('error');
    expect(outcomeOf(undefined)).toBe('refused');
  });
});
