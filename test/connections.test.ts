import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReferenceUpstream } from '../src/reference-upstream/server.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { acceptsConnections, freePort, startGatewayProcess } from './support/process.js';
import { until } from './support/until.js';

/** A raw TCP client: what it received, and when the server closed it (a reset counts). */
interface RawClient {
  readonly socket: Socket;
  /** Everything the server sent, once the connection is closed. */
  readonly closed: Promise<string>;
}

async function rawClient(port: number, firstBytes?: string): Promise<RawClient> {
  const socket = connect({ host: '127.0.0.1', port });
  let received = '';
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (received += chunk));
  // A reset (the server closed before reading what was written) ends the connection too.
  socket.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  await once(socket, 'connect');
  if (firstBytes !== undefined) socket.write(firstBytes);
  return { socket, closed };
}

/** `promise`, or a failure naming `what` after `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)),
  );
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Writes `chunk()` every 50 ms, a client that never stops and never finishes, until the server
 * closes the connection: what the server sent. Fails after 10 s: far above the timeouts under
 * test, far below Node's own defaults (60 s for a head, 300 s for a request).
 */
async function trickleUntilClosed(client: RawClient, chunk: () => string | undefined): Promise<string> {
  const timer = setInterval(() => {
    const next = chunk();
    if (next !== undefined && client.socket.writable) client.socket.write(next);
  }, 50);
  try {
    return await within(client.closed, 10_000, 'the trickling connection closed');
  } finally {
    clearInterval(timer);
  }
}

const headsQuery = JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' });
const requestTimeout = /^HTTP\/1\.1 408 Request Timeout\r\n/;

describe('slow requests (HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS)', () => {
  let on: TestGateway;
  let port: number;

  beforeAll(async () => {
    on = await startTestGateway({ env: { HEADERS_TIMEOUT_MS: '300', REQUEST_TIMEOUT_MS: '600' } });
    port = Number(new URL(await on.listen()).port);
  });
  afterAll(() => on.close());

  it('closes a connection whose request head trickles in without end, with a 408, and calls no upstream', async () => {
    on.reset();
    const client = await rawClient(port, 'POST /graphql HTTP/1.1\r\nHost: gateway\r\n');
    // A header line at a time, never the blank line that ends the head.
    expect(await trickleUntilClosed(client, () => 'x-trickle: 1\r\n')).toMatch(requestTimeout);
    expect(on.calls()).toHaveLength(0);
  });

  it('closes a connection that never says anything', async () => {
    const client = await rawClient(port);
    expect(await within(client.closed, 10_000, 'the silent connection closed')).toMatch(requestTimeout);
  });

  it('answers 408 to a request whose body trickles in past REQUEST_TIMEOUT_MS, and calls no upstream', async () => {
    on.reset();
    const client = await rawClient(
      port,
      `POST /graphql HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${headsQuery.length}\r\n\r\n`,
    );
    // A byte at a time, all but the last: the body is never complete.
    let sent = 0;
    expect(
      await trickleUntilClosed(client, () => (sent < headsQuery.length - 1 ? headsQuery[sent++] : undefined)),
    ).toMatch(requestTimeout);
    expect(on.calls()).toHaveLength(0);
  });

  it('leaves an idle keep-alive connection to keepAliveTimeout: it serves a request after idling longer than the head timeout', async () => {
    const ask = `POST /graphql HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: ${headsQuery.length}\r\n\r\n${headsQuery}`;
    const client = await rawClient(port);
    const answers: string[] = [];
    client.socket.on('data', (chunk: string) => answers.push(chunk));
    client.socket.write(ask);
    await until(() => answers.join('').includes('"totalCount"'), 'the first answer');
    // Idle for three head timeouts (and ten checking intervals), then the same connection asks again.
    await new Promise((resolve) => setTimeout(resolve, 900));
    expect(client.socket.destroyed).toBe(false);
    answers.length = 0;
    client.socket.write(ask);
    await until(() => answers.join('').includes('"totalCount"'), 'the second answer on the same connection');
    expect(answers.join('')).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    client.socket.destroy();
  });
});

/** Tests that start a process of their own: a busy machine may take seconds to start one. */
const PROCESS_TEST = { timeout: 60_000 };

describe('MAX_CONNECTIONS and ADMIN_PORT (the gateway process)', PROCESS_TEST, () => {
  it('closes connections over the cap at once and counts them, answers probes on ADMIN_PORT meanwhile, serves again once the flood is gone, and stops the admin port on SIGTERM', async ({
    onTestFinished,
  }) => {
    const reference = await startReferenceUpstream();
    const adminPort = await freePort();
    // Timeouts longer than the test: whatever closes a connection here is the cap.
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: reference.url,
      LOG_LEVEL: 'warn',
      MAX_CONNECTIONS: '4',
      ADMIN_PORT: String(adminPort),
      HEADERS_TIMEOUT_MS: '600000',
      REQUEST_TIMEOUT_MS: '600000',
      SHUTDOWN_DELAY_MS: '0',
    });
    const flood: RawClient[] = [];
    onTestFinished(async () => {
      for (const client of flood) client.socket.destroy();
      gateway.kill();
      await reference.close();
    });
    const publicPort = Number(new URL(gateway.endpoint).port);
    const admin = `http://127.0.0.1:${adminPort}`;
    expect(gateway.stdout()).toContain(`Admin endpoints (/health, /ready, /metrics) on ${admin}\n`);
    const adminGet = async (path: string) => {
      const answer = await request(`${admin}${path}`, { reset: true });
      return { status: answer.statusCode, text: await answer.body.text() };
    };
    const adminSample = async (series: string) => sampleOf((await adminGet('/metrics')).text, series);

    // The cap's worth of clients, each in the middle of its request head.
    for (let i = 0; i < 4; i++) flood.push(await rawClient(publicPort, 'GET /health HTTP/1.1\r\nHost: gateway\r\n'));
    await until(
      async () => (await adminSample('gateway_connections_open{port="public"}')) === 4,
      'the four connections open at the gateway',
    );

    // Over the cap: closed as they arrive, before a byte of an answer; a probe on the public port too.
    const over = await Promise.all([
      rawClient(publicPort),
      rawClient(publicPort),
      rawClient(publicPort, 'GET /health HTTP/1.1\r\nHost: gateway\r\n\r\n'),
    ]);
    for (const client of over) expect(await within(client.closed, 10_000, 'a connection over the cap closed')).toBe('');
    expect(await adminSample('gateway_connections_dropped_total{port="public"}')).toBe(3);
    expect(flood.filter((client) => client.socket.destroyed)).toHaveLength(0);

    // The admin port answers all the while.
    expect(await adminGet('/health')).toEqual({ status: 200, text: '{"status":"ok"}' });
    expect(await adminGet('/ready')).toEqual({ status: 200, text: '{"status":"ready"}' });
    expect((await adminGet('/graphql')).status).toBe(404);

    // The flood ends: once the gateway has seen its connections go, the next query is served.
    for (const client of flood) client.socket.destroy();
    await until(
      async () => (await adminSample('gateway_connections_open{port="public"}')) === 0,
      'the flood gone at the gateway',
    );
    const answer = await request(gateway.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: headsQuery,
    });
    expect(answer.statusCode).toBe(200);
    expect(((await answer.body.json()) as { data: { heads: { totalCount: number } } }).data.heads.totalCount).toBe(
      reference.store.headCount,
    );
    expect(await adminSample('gateway_connections_dropped_total{port="public"}')).toBe(3);

    // Shutdown closes the admin port with the public one, while an operation is still in flight.
    reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    const inFlight = request(gateway.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: headsQuery,
    });
    await until(() => reference.inFlight() === 1, 'the listing held at the upstream');
    gateway.child.kill('SIGTERM');
    await until(async () => !(await acceptsConnections(admin)), 'the admin port closed');
    expect(gateway.child.exitCode).toBeNull();
    reference.releaseHeld();
    expect((await inFlight).statusCode).toBe(200);
    expect(await gateway.exited).toBe(0);
  });
});

describe('MAX_CONNECTIONS and ADMIN_PORT with WORKERS=2', PROCESS_TEST, () => {
  it('caps each worker, closing what is over at once (never handed round the workers), and serves the admin port from the workers', async ({
    onTestFinished,
  }) => {
    const adminPort = await freePort();
    const gateway = await startGatewayProcess({
      UPSTREAM_URL: '',
      WORKERS: '2',
      LOG_LEVEL: 'warn',
      MAX_CONNECTIONS: '2',
      ADMIN_PORT: String(adminPort),
      HEADERS_TIMEOUT_MS: '600000',
      REQUEST_TIMEOUT_MS: '600000',
      SHUTDOWN_DELAY_MS: '0',
      SHUTDOWN_GRACE_MS: '600000',
    });
    const flood: RawClient[] = [];
    onTestFinished(() => {
      for (const client of flood) client.socket.destroy();
      if (gateway.child.exitCode === null) gateway.child.kill('SIGINT');
    });
    const admin = `http://127.0.0.1:${adminPort}`;
    expect(gateway.stdout()).toContain(`Admin endpoints (/health, /ready, /metrics) on ${admin}\n`);
    const scrape = async () => (await (await request(`${admin}/metrics`, { reset: true })).body.text()) as string;

    // Seven connections for two workers of two each: whichever worker gets one, it is held or closed.
    let closed = 0;
    for (let i = 0; i < 7; i++) {
      const client = await rawClient(
        Number(new URL(gateway.endpoint).port),
        'GET /health HTTP/1.1\r\nHost: gateway\r\n',
      );
      void client.closed.then(() => closed++);
      flood.push(client);
    }
    // Summed over the workers, as on the public port.
    await until(
      async () => closed + (sampleOf(await scrape(), 'gateway_connections_open{port="public"}') ?? 0) === 7,
      'every connection held or closed',
    );
    expect(closed).toBeGreaterThanOrEqual(3);
    expect(sampleOf(await scrape(), 'gateway_connections_dropped_total{port="public"}')).toBe(closed);
    const health = await request(`${admin}/health`, { reset: true });
    expect(health.statusCode).toBe(200);
    await health.body.dump();
    // The connections held have each sent half a request head: each worker's stop answers them
    // 408 and goes on (a grace of ten minutes: waiting for them would outlast the test).
    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);
  });
});
