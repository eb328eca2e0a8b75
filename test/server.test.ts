import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import { getIntrospectionQuery, type IntrospectionQuery } from 'graphql';
import type { AddressInfo } from 'node:net';
import { Client, request } from 'undici';
import { loadConfig } from '../src/config.js';
import { createGatewayServer, stopGatewayServer } from '../src/http-server.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { schema } from '../src/schema/index.js';
import { sampleOf } from './support/metrics.js';
import { startTestGateway } from './support/gateway.js';
import { spawnGateway } from './support/process.js';

/** `npm start` as an operator runs it: no UPSTREAM_URL, so the embedded reference upstream. */
describe('the gateway process (npm start)', () => {
  let child: ChildProcessWithoutNullStreams;
  let endpoint: string;
  let stdout = '';

  beforeAll(async () => {
    child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { ...process.env, PORT: '0', UPSTREAM_URL: '', LOG_LEVEL: 'warn' } });
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const deadline = Date.now() + 20_000;
    while (!/Gateway listening on (\S+)/.test(stdout)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`gateway did not start: ${stdout}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    endpoint = /Gateway listening on (\S+)/.exec(stdout)![1]!;
  });

  afterAll(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  const post = async (query: string, headers: Record<string, string> = {}) => {
    const response = await fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query }) });
    return { status: response.status, headers: response.headers, body: (await response.json()) as any };
  };

  it('says in one line that it serves the embedded reference upstream', () => {
    expect(stdout).toMatch(/^No UPSTREAM_URL set: serving the embedded reference upstream at http:\/\/127\.0\.0\.1:\d+\/v2 \(demo login: demo \/ demo-password\)\.$/m);
  });

  it('answers the head-and-hair query over a real port, and forwards the token it is given', async () => {
    const heads = await post('{ heads(first: 2) { totalCount nodes { name hair { name } } } }');
    expect(heads.status).toBe(200);
    expect(heads.body.data.heads.totalCount).toBeGreaterThanOrEqual(250);
    expect(heads.body.data.heads.nodes).toHaveLength(2);

    const login = await post(`mutation { login(input: { username: "${DEMO_CREDENTIALS.username}", password: "${DEMO_CREDENTIALS.password}" }) { accessToken } }`);
    const token = login.body.data.login.accessToken as string;
    const permissions = await post('{ permissions(first: 1) { totalCount } }', { authorization: `Bearer ${token}` });
    expect(permissions.body.data.permissions.totalCount).toBeGreaterThan(0);
    const refused = await post('{ permissions(first: 1) { totalCount } }', { authorization: 'Bearer not-issued' });
    expect(refused.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  });

  it('shuts down cleanly on SIGTERM', async () => {
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
  });
});

describe('the schema as a manual', () => {
  it('describes every type, field, argument, input field and enum value', async () => {
    const { graphqlSync } = await import('graphql');
    const result = graphqlSync({ schema, source: getIntrospectionQuery() });
    const introspection = result.data as unknown as IntrospectionQuery;
    const missing: string[] = [];
    for (const type of introspection.__schema.types) {
      if (type.name.startsWith('__') || ['String', 'Int', 'Float', 'Boolean', 'ID'].includes(type.name)) continue;
      if (!type.description) missing.push(type.name);
      if ('fields' in type && type.fields) {
        for (const field of type.fields) {
          if (!field.description) missing.push(`${type.name}.${field.name}`);
          for (const arg of field.args) if (!arg.description) missing.push(`${type.name}.${field.name}(${arg.name})`);
        }
      }
      if ('inputFields' in type && type.inputFields) for (const field of type.inputFields) if (!field.description) missing.push(`${type.name}.${field.name}`);
      if ('enumValues' in type && type.enumValues) for (const value of type.enumValues) if (!value.description) missing.push(`${type.name}.${value.name}`);
    }
    expect(missing).toEqual([]);
  });
});

describe('WORKERS=2 (node:cluster)', () => {
  it('serves from two workers behind one port and stops them all on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { ...process.env, PORT: '0', UPSTREAM_URL: '', WORKERS: '2', LOG_LEVEL: 'warn' } });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    try {
      const deadline = Date.now() + 30_000;
      while (!/Gateway listening on (\S+) \(2 workers\)/.test(stdout)) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`cluster did not start: ${stdout}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const url = /Gateway listening on (\S+)/.exec(stdout)![1]!;
      const answers = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' }) });
          return ((await response.json()) as any).data.heads.totalCount as number;
        }),
      );
      expect(new Set(answers)).toEqual(new Set([answers[0]]));
      expect(answers[0]).toBeGreaterThanOrEqual(250);
      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});

describe('WORKERS=2: /metrics answers the sum over the workers', () => {
  it('counts every operation, whichever worker ran it and whichever answers the scrape', async ({ onTestFinished }) => {
    const { child, ready } = spawnGateway({ WORKERS: '2' });
    // Also when the test fails or times out, so no cluster outlives it (the primary stops its workers).
    onTestFinished(() => {
      if (child.exitCode === null) child.kill('SIGTERM');
    });
    const endpoint = await ready;
    // Every request on a connection of its own (reset): the cluster hands new connections to
    // the workers in turn, so operations and scrapes both land on each of the two workers.
    const operations = 11;
    for (let i = 0; i < operations; i++) {
      const answer = await request(endpoint, {
        method: 'POST',
        reset: true,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: 'query MetricsProbe { heads(first: 1) { totalCount } }' }),
      });
      expect(((await answer.body.json()) as any).data.heads.totalCount).toBeGreaterThanOrEqual(250);
    }
    const labels = 'operation="MetricsProbe",type="query",outcome="ok"';
    for (let scrape = 0; scrape < 4; scrape++) {
      const answer = await request(endpoint.replace(/\/graphql$/, '/metrics'), { reset: true });
      expect(answer.statusCode).toBe(200);
      const text = await answer.body.text();
      expect(sampleOf(text, `gateway_operation_duration_seconds_count{${labels}}`)).toBe(operations);
      expect(sampleOf(text, `gateway_operation_duration_seconds_bucket{le="+Inf",${labels}}`)).toBe(operations);
      expect(sampleOf(text, 'gateway_upstream_call_duration_seconds_count{operation="listHeads",status="200"}')).toBe(operations);
      expect(sampleOf(text, 'gateway_operations_in_flight')).toBe(0);
    }
  });
});

describe('stopping (what SIGTERM runs)', () => {
  it('lets the request in flight finish with Connection: close, and serves nothing more on its connection', async () => {
    const t = await startTestGateway();
    const server = createGatewayServer(t.gateway, loadConfig({}));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // One keep-alive connection, one request at a time.
    const client = new Client(origin, { pipelining: 1 });
    try {
      const body = JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' });
      const send = () => client.request({ path: '/graphql', method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const warm = await send();
      expect(warm.headers.connection).toBe('keep-alive');
      await warm.body.text();
      t.reference.injectFault('listHeads', { kind: 'latency', ms: 300 });
      const slow = send();
      // Stop once the slow request is with the upstream.
      while (t.reference.inFlight() === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const stopped = stopGatewayServer(server, 20_000);
      const answered = await slow;
      expect(answered.statusCode).toBe(200);
      expect(answered.headers.connection).toBe('close');
      expect(((await answered.body.json()) as any).data.heads.totalCount).toBeGreaterThan(0);
      // The server closed before the grace period: nothing was left open.
      await stopped;
      expect(server.listening).toBe(false);
      await expect(send()).rejects.toThrow();
    } finally {
      await client.close();
      await t.close();
    }
  });
});
