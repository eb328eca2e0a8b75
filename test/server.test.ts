import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { getIntrospectionQuery, type IntrospectionQuery } from 'graphql';
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../src/config.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { startReferenceUpstream } from '../src/reference-upstream/server.js';
import { schema } from '../src/schema/index.js';
import { createGatewayServer, stopGatewayServer } from '../src/server/http/http-server.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { acceptsConnections, type GatewayProcess, startGatewayProcess } from './support/process.js';
import { until } from './support/until.js';

/**
 * `npm start` as an operator runs it: no UPSTREAM_URL, so the embedded reference upstream. The
 * tests are steps in the life of one process (started, serving, stopped): they keep their order
 * under --sequence.shuffle.
 */
describe('the gateway process (npm start)', { shuffle: false }, () => {
  let gateway: GatewayProcess;
  let endpoint: string;

  beforeAll(async () => {
    gateway = await startGatewayProcess({ UPSTREAM_URL: '', LOG_LEVEL: 'warn' });
    endpoint = gateway.endpoint;
  });

  afterAll(() => gateway.kill());

  const post = async (query: string, headers: Record<string, string> = {}) => {
    const response = await fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query }),
    });
    return { status: response.status, headers: response.headers, body: (await response.json()) as any };
  };

  it('says in one line that it serves the embedded reference upstream', () => {
    expect(gateway.stdout()).toMatch(
      /^No UPSTREAM_URL set: serving the embedded reference upstream at http:\/\/127\.0\.0\.1:\d+\/v2 \(demo login: demo \/ demo-password\)\.$/m,
    );
  });

  it('gives the GraphiQL address in its listening line; /graphiql and a browser opening / are sent there', async () => {
    const origin = new URL(endpoint).origin;
    expect(gateway.stdout()).toContain(`Gateway listening on ${endpoint} (GraphiQL: ${origin}/graphiql)\n`);
    for (const path of ['/', '/graphiql']) {
      const response = await fetch(`${origin}${path}`, { redirect: 'manual', headers: { accept: 'text/html' } });
      expect(response.status, path).toBe(302);
      expect(response.headers.get('location'), path).toBe('/graphql');
    }
  });

  it('answers the head-and-hair query over a real port, and forwards the token it is given', async () => {
    const heads = await post('{ heads(first: 2) { totalCount nodes { name hair { name } } } }');
    expect(heads.status).toBe(200);
    expect(heads.body.data.heads.totalCount).toBeGreaterThanOrEqual(250);
    expect(heads.body.data.heads.nodes).toHaveLength(2);

    const login = await post(
      `mutation { login(input: { username: "${DEMO_CREDENTIALS.username}", password: "${DEMO_CREDENTIALS.password}" }) { accessToken } }`,
    );
    const token = login.body.data.login.accessToken as string;
    const permissions = await post('{ permissions(first: 1) { totalCount } }', { authorization: `Bearer ${token}` });
    expect(permissions.body.data.permissions.totalCount).toBeGreaterThan(0);
    const refused = await post('{ permissions(first: 1) { totalCount } }', { authorization: 'Bearer not-issued' });
    expect(refused.body.errors[0].extensions.code).toBe('UNAUTHENTICATED');
  });

  it('shuts down cleanly on SIGTERM', async () => {
    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);
  });
});

/** Tests that start a process of their own: a busy machine may take seconds to start one. */
const PROCESS_TEST = { timeout: 60_000 };

describe('log lines', PROCESS_TEST, () => {
  /**
   * Sends one operation with `requestId` to a gateway process, stops it with `signal` once answered, and returns its
   * JSON log lines and how it ended.
   */
  async function linesAfter(requestId: string, signal: NodeJS.Signals) {
    // The drain alone: time out of rotation first (SHUTDOWN_DELAY_MS) is the subject of its own tests below.
    // Every operation logged (OPERATION_LOG=all): the line of a success is the one followed here.
    const gateway = await startGatewayProcess({ UPSTREAM_URL: '', SHUTDOWN_DELAY_MS: '0', OPERATION_LOG: 'all' });
    try {
      const closed = once(gateway.child, 'close');
      const response = await fetch(gateway.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': requestId },
        body: JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' }),
      });
      expect(response.status).toBe(200);
      // Outright, the kill loses what was not yet written: it comes once the line is on its way out
      // (pino's asynchronous destination writes it within milliseconds, not at exit).
      if (signal === 'SIGKILL')
        await until(
          () => gateway.stdout().includes(`"requestId":"${requestId}"`),
          'the operation line on stdout while the process runs',
        );
      gateway.child.kill(signal);
      const [code, endedBy] = await closed;
      const lines = gateway
        .stdout()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      return { lines, code, endedBy };
    } finally {
      gateway.kill();
    }
  }

  it('are all on stdout when the process has exited: the operation line and the last line, written on the way out', async () => {
    const { lines, code } = await linesAfter('last-batch-1', 'SIGTERM');
    expect(code).toBe(0);
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'graphql operation', requestId: 'last-batch-1', outcome: 'ok', upstreamCalls: 1 }),
    );
    // 'shutting down' is logged as the stop begins; only the drain's operations may log after it
    // (the answer can reach the client before its operation's line is logged).
    const stopping = lines.findIndex((line) => line.msg === 'shutting down');
    expect(stopping).toBeGreaterThan(-1);
    for (const line of lines.slice(stopping + 1)) expect(line.msg).toBe('graphql operation');
  });

  it('are on stdout as they are logged, not held for the exit: the line of an operation arrives while the process runs, and a kill outright keeps it', async () => {
    // No exit handler runs on SIGKILL: what was not written before it is lost (the last few milliseconds' lines).
    const { lines, endedBy } = await linesAfter('killed-after-1', 'SIGKILL');
    expect(endedBy).toBe('SIGKILL');
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: 'graphql operation',
        requestId: 'killed-after-1',
        outcome: 'ok',
        upstreamCalls: 1,
      }),
    );
  });
});

/**
 * Shutdown with requests in flight, on the real process against a reference upstream in this one:
 * the upstream holds the request's call until the test has seen the signal's effect.
 */
describe('NODE_ENV=production: no GraphiQL', PROCESS_TEST, () => {
  it('names none at start; a browser opening / or /graphql gets a page saying where the endpoint and the docs are', async () => {
    const reference = await startReferenceUpstream();
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: reference.url,
      NODE_ENV: 'production',
      LOG_LEVEL: 'warn',
    });
    try {
      expect(gateway.stdout()).toMatch(/^Gateway listening on http:\/\/127\.0\.0\.1:\d+\/graphql$/m);
      const origin = new URL(gateway.endpoint).origin;
      for (const path of ['/', '/graphql']) {
        const response = await fetch(`${origin}${path}`, {
          headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' },
        });
        expect(response.status, path).toBe(200);
        expect(response.headers.get('content-type'), path).toBe('text/html; charset=utf-8');
        const html = await response.text();
        expect(html, path).toContain('Send GraphQL to /graphql');
        expect(html, path).toContain('GraphiQL and introspection are off here');
      }
      expect(reference.requests).toEqual([]);
      gateway.child.kill('SIGINT');
      expect(await gateway.exited).toBe(0);
    } finally {
      gateway.kill();
      await reference.close();
    }
  });
});

describe('graceful shutdown', PROCESS_TEST, () => {
  const headsQuery = '{ heads(first: 2) { totalCount nodes { name } } }';
  const postHeads = (endpoint: string, dispatcher: Dispatcher) =>
    request(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: headsQuery }),
      dispatcher,
    });

  it.each([
    ['SIGTERM', '0'],
    // A person's Ctrl-C: no time in rotation to wait out, whatever SHUTDOWN_DELAY_MS says.
    ['SIGINT', '600000'],
  ] as const)(
    'on %s (SHUTDOWN_DELAY_MS=%s): refuses new connections, lets the request in flight finish, closes its connection, exits 0',
    async (signal, delayMs) => {
      const reference = await startReferenceUpstream();
      // A grace far longer than the test: only the request finishing can end the wait.
      const gateway = await startGatewayProcess({
        UPSTREAM_URL: reference.url,
        LOG_LEVEL: 'warn',
        SHUTDOWN_DELAY_MS: delayMs,
        SHUTDOWN_GRACE_MS: '600000',
      });
      // One connection, which the client would keep alive for ten minutes.
      const client = new Agent({ connections: 1, keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
      try {
        reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
        let answered = false;
        const inFlight = postHeads(gateway.endpoint, client).finally(() => (answered = true));
        await until(() => reference.inFlight() === 1, 'the listing held at the upstream');
        expect(await acceptsConnections(gateway.endpoint)).toBe(true);

        gateway.child.kill(signal);
        await until(async () => !(await acceptsConnections(gateway.endpoint)), 'new connections refused');
        expect(answered).toBe(false);
        expect(gateway.child.exitCode).toBeNull();

        expect(reference.releaseHeld()).toBe(1);
        const response = await inFlight;
        expect(response.statusCode).toBe(200);
        // The answer itself says the connection ends with it.
        expect(response.headers.connection).toBe('close');
        const body = (await response.body.json()) as {
          data: { heads: { totalCount: number; nodes: { name: string }[] } };
        };
        expect(body.data.heads.totalCount).toBe(reference.store.headCount);
        expect(body.data.heads.nodes.map((n) => n.name)).toEqual(
          reference.store
            .headIds()
            .slice(0, 2)
            .map((id) => reference.store.findHead(id)!.head.name),
        );
        // The connection that carried it was closed behind the answer: no further request rides it.
        await expect(postHeads(gateway.endpoint, client)).rejects.toThrow();
        expect(await gateway.exited).toBe(0);
        expect(reference.requests).toHaveLength(1);
      } finally {
        gateway.kill();
        await client.close();
        await reference.close();
      }
    },
  );

  it('cuts a request still in flight after SHUTDOWN_GRACE_MS, cancels its upstream call and exits 0', async () => {
    const graceMs = 500;
    const reference = await startReferenceUpstream();
    // Calls may wait longer than the test runs: only the grace running out can end the request.
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: reference.url,
      LOG_LEVEL: 'warn',
      SHUTDOWN_DELAY_MS: '0',
      SHUTDOWN_GRACE_MS: String(graceMs),
      UPSTREAM_TIMEOUT_MS: '60000',
      OPERATION_TIMEOUT_MS: '120000',
    });
    const client = new Agent();
    try {
      // Held for ten minutes.
      reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
      const inFlight = postHeads(gateway.endpoint, client);
      await until(() => reference.inFlight() === 1, 'the listing held at the upstream');
      gateway.child.kill('SIGTERM');
      const cut = await inFlight.then(
        () => undefined,
        (error: Error & { code?: string }) => error.code,
      );
      // The connection closed without an answer (not before the grace is over: on a fake clock below).
      expect(cut).toBe('UND_ERR_SOCKET');
      expect(await gateway.exited).toBe(0);
      // The gateway's upstream call went with the request.
      await until(() => reference.inFlight() === 0, 'the upstream call cancelled');
    } finally {
      gateway.kill();
      await client.close();
      await reference.close();
    }
  });
});

/** Whether a process with this pid is still there (signal 0 asks without sending anything). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('leaving the rotation before the drain (SHUTDOWN_DELAY_MS)', PROCESS_TEST, () => {
  const probe = async (url: string) => {
    const response = await fetch(url);
    return { status: response.status, body: (await response.json()) as unknown };
  };

  it('on SIGTERM /ready answers 503 on both ports at once while both go on serving, kept-alive connections too; a second signal ends the wait', async () => {
    // A delay longer than the test: only the second signal can end it.
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: '',
      LOG_LEVEL: 'warn',
      ADMIN_PORT: '0',
      SHUTDOWN_DELAY_MS: '600000',
      SHUTDOWN_GRACE_MS: '600000',
    });
    const client = new Agent({ connections: 1, keepAliveTimeout: 600_000, keepAliveMaxTimeout: 600_000 });
    try {
      const admin = /Admin endpoints \(\/health, \/ready, \/metrics\) on (\S+)/.exec(gateway.stdout())![1]!;
      const ready = { public: new URL('/ready', gateway.endpoint).href, admin: `${admin}/ready` };
      expect((await probe(ready.admin)).status).toBe(200);
      const query = () =>
        request(gateway.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' }),
          dispatcher: client,
        });
      const before = await query();
      await before.body.json();
      const served = new Set<unknown>();
      client.on('connect', (_origin, targets) => served.add(targets));

      gateway.child.kill('SIGTERM');
      await until(async () => (await probe(ready.admin)).status === 503, '/ready on ADMIN_PORT answering 503');
      expect(await probe(ready.admin)).toEqual({ status: 503, body: { status: 'not ready', reason: 'shutting down' } });
      expect(await probe(ready.public)).toEqual({
        status: 503,
        body: { status: 'not ready', reason: 'shutting down' },
      });
      // Alive all the same, and serving as before: on the kept-alive connection (no new one made,
      // none closed behind the answer) and on new ones.
      expect((await probe(`${admin}/health`)).status).toBe(200);
      for (let i = 0; i < 3; i++) {
        const during = await query();
        expect(during.statusCode).toBe(200);
        expect(during.headers.connection).not.toBe('close');
        expect(((await during.body.json()) as any).data.heads.totalCount).toBeGreaterThan(0);
      }
      expect(served.size).toBe(0);
      expect(await acceptsConnections(gateway.endpoint)).toBe(true);
      expect(gateway.child.exitCode).toBeNull();

      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
    } finally {
      gateway.kill();
      await client.close();
    }
  });

  it('with WORKERS=2 the primary hands the signal to every worker: each leaves the rotation, and each drains on the second', async () => {
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: '',
      LOG_LEVEL: 'warn',
      WORKERS: '2',
      ADMIN_PORT: '0',
      SHUTDOWN_DELAY_MS: '600000',
    });
    try {
      const admin = /Admin endpoints \(\/health, \/ready, \/metrics\) on (\S+)/.exec(gateway.stdout())![1]!;
      gateway.child.kill('SIGTERM');
      await until(async () => (await probe(`${admin}/ready`)).status === 503, '/ready answering 503');
      // A new connection each: the cluster hands them to the workers in turn, and none says ready.
      const statuses = await Promise.all(Array.from({ length: 8 }, async () => (await probe(`${admin}/ready`)).status));
      expect(statuses).toEqual(Array(8).fill(503));
      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
    } finally {
      gateway.kill();
    }
  });

  it('with WORKERS=2, a signal to the whole process group (a supervisor, a terminal) is one signal to each worker, not two: the delay holds', async () => {
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: '',
      LOG_LEVEL: 'warn',
      WORKERS: '2',
      ADMIN_PORT: '0',
      SHUTDOWN_DELAY_MS: '600000',
    });
    try {
      const admin = /Admin endpoints \(\/health, \/ready, \/metrics\) on (\S+)/.exec(gateway.stdout())![1]!;
      const workers = execFileSync('ps', ['-o', 'pid=', '--ppid', String(gateway.child.pid)], { encoding: 'utf8' })
        .trim()
        .split(/\s+/)
        .map(Number);
      expect(workers).toHaveLength(2);
      // What systemd's KillMode=control-group does: every process of the group at once.
      for (const pid of [gateway.child.pid!, ...workers]) process.kill(pid, 'SIGTERM');
      await until(async () => (await probe(`${admin}/ready`)).status === 503, '/ready answering 503');
      // Each worker heard the primary's relay as the same stop: both still serve, out of rotation.
      const statuses = await Promise.all(
        Array.from(
          { length: 8 },
          async () =>
            (
              await fetch(gateway.endpoint, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: JSON.stringify({ query: '{ __typename }' }),
              })
            ).status,
        ),
      );
      expect(statuses).toEqual(Array(8).fill(200));
      expect(gateway.child.exitCode).toBeNull();
      expect(workers.map((pid) => processAlive(pid))).toEqual([true, true]);
      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
    } finally {
      gateway.kill();
    }
  });

  it('a connection that sent part of a request head and nothing more does not hold the stop: answered 408 and closed, even when the client keeps its end open', async () => {
    // A grace far longer than the test: only the half-sent head being cut can end the wait.
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: '',
      LOG_LEVEL: 'warn',
      SHUTDOWN_DELAY_MS: '0',
      SHUTDOWN_GRACE_MS: '600000',
    });
    const { hostname, port } = new URL(gateway.endpoint);
    // As a slow client that ignores the server's end of the connection would.
    const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true });
    try {
      await once(socket, 'connect');
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
      // The server's end of it: this client never closes its own.
      const ended = once(socket, 'end');
      socket.write('POST /graphql HTTP/1.1\r\nHost: gateway\r\nContent-Type: appl');
      gateway.child.kill('SIGTERM');
      await ended;
      expect(received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
      expect(await gateway.exited).toBe(0);
    } finally {
      socket.destroy();
      gateway.kill();
    }
  });
});

describe('a request head under way as the process stops', PROCESS_TEST, () => {
  it('is served if it arrives within a second of the stop, with Connection: close', async () => {
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: '',
      LOG_LEVEL: 'warn',
      SHUTDOWN_DELAY_MS: '0',
      SHUTDOWN_GRACE_MS: '600000',
    });
    const { hostname, port } = new URL(gateway.endpoint);
    const socket = connect({ host: hostname, port: Number(port) });
    try {
      await once(socket, 'connect');
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
      const closed = once(socket, 'close');
      const body = JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' });
      socket.write('POST /graphql HTTP/1.1\r\nHost: gateway\r\n');
      gateway.child.kill('SIGTERM');
      // The stop has begun (no new connection is taken); the rest of the head, and the body, come now.
      await until(async () => !(await acceptsConnections(gateway.endpoint)), 'the listener closed');
      socket.write(`Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      await closed;
      expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(received.toLowerCase()).toContain('connection: close');
      expect(received).toContain('"totalCount"');
      expect(await gateway.exited).toBe(0);
    } finally {
      socket.destroy();
      gateway.kill();
    }
  });
});

describe('stopGatewayServer, on a fake clock', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('cuts a request still in flight when the grace runs out, and not a millisecond before', async () => {
    const graceMs = 500;
    const server = createGatewayServer(t.handler, loadConfig({}), t.metrics);
    const sockets: Socket[] = [];
    server.on('connection', (socket: Socket) => sockets.push(socket));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = new Agent();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
      const inFlight = request(`http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' }),
        dispatcher: client,
      }).then(
        () => 'answered',
        (error: Error & { code?: string }) => error.code,
      );
      await until(() => t.reference.inFlight() === 1, 'the listing held at the upstream');
      const stopped = stopGatewayServer(server, graceMs);
      vi.advanceTimersByTime(graceMs - 1);
      expect(sockets.map((socket) => socket.destroyed)).toEqual([false]);
      vi.advanceTimersByTime(1);
      expect(sockets.map((socket) => socket.destroyed)).toEqual([true]);
      expect(await inFlight).toBe('UND_ERR_SOCKET');
      await stopped;
    } finally {
      vi.useRealTimers();
      t.reference.releaseHeld();
      if (server.listening) server.close();
      server.closeAllConnections();
      await client.close();
    }
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
      if ('inputFields' in type && type.inputFields)
        for (const field of type.inputFields) if (!field.description) missing.push(`${type.name}.${field.name}`);
      if ('enumValues' in type && type.enumValues)
        for (const value of type.enumValues) if (!value.description) missing.push(`${type.name}.${value.name}`);
    }
    expect(missing).toEqual([]);
  });
});

describe('WORKERS=2 (node:cluster)', PROCESS_TEST, () => {
  it('serves from two workers behind one port and stops them all on SIGTERM', async () => {
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: '',
      WORKERS: '2',
      LOG_LEVEL: 'warn',
      SHUTDOWN_DELAY_MS: '0',
    });
    try {
      expect(gateway.stdout()).toMatch(/Gateway listening on \S+ \(2 workers\)/);
      const answers = await Promise.all(
        Array.from({ length: 8 }, async () => {
          const response = await fetch(gateway.endpoint, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' }),
          });
          return ((await response.json()) as any).data.heads.totalCount as number;
        }),
      );
      expect(new Set(answers)).toEqual(new Set([answers[0]]));
      expect(answers[0]).toBeGreaterThanOrEqual(250);
      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
    } finally {
      gateway.kill();
    }
  });
});

describe('WORKERS=2: /metrics answers the sum over the workers', PROCESS_TEST, () => {
  it('counts every operation, whichever worker ran it and whichever answers the scrape', async ({ onTestFinished }) => {
    const gateway = await startGatewayProcess({ UPSTREAM_URL: '', WORKERS: '2', LOG_LEVEL: 'warn' });
    // Also when the test fails or times out, so no cluster outlives it (the primary stops its workers).
    onTestFinished(() => {
      if (gateway.child.exitCode === null) gateway.child.kill('SIGINT');
    });
    const { endpoint } = gateway;
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
      expect(sampleOf(text, 'gateway_upstream_call_duration_seconds_count{operation="listHeads",status="200"}')).toBe(
        operations,
      );
      expect(sampleOf(text, 'gateway_operations_in_flight')).toBe(0);
    }
  });
});

describe('a client that sends Connection: close', () => {
  let t: TestGateway;
  let port: number;
  beforeAll(async () => {
    t = await startTestGateway();
    port = Number(new URL(await t.listen()).port);
  });
  afterAll(() => t.close());

  /** One request on a fresh socket, written by hand; the whole exchange until the server closes it. */
  async function exchange(accept: string): Promise<{ head: string; body: string; closedByServer: boolean }> {
    const body = JSON.stringify({
      query: `{ head(id: "${t.reference.store.headIds()[0]!}") { name ... @defer { url } } }`,
    });
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(
      `POST /graphql HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: ${accept}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const closedByServer = await Promise.race([
      once(socket, 'end').then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5_000)),
    ]);
    socket.destroy();
    const text = Buffer.concat(chunks).toString('utf8');
    const split = text.indexOf('\r\n\r\n');
    return { head: text.slice(0, split).toLowerCase(), body: text.slice(split + 4), closedByServer };
  }

  it.each(['multipart/mixed', 'text/event-stream', 'application/json'])(
    'gets %s answers that say Connection: close, and its connection closed behind them',
    async (accept) => {
      const { head, body, closedByServer } = await exchange(accept);
      expect(head).toMatch(/^http\/1\.1 200/);
      expect(head).toMatch(/\r\nconnection: close(\r\n|$)/);
      expect(head).not.toMatch(/connection: keep-alive/);
      expect(body).toContain('"url"');
      expect(closedByServer).toBe(true);
    },
  );
});
