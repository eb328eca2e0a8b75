import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { defaultTracingSettings, loadConfig } from '../src/config.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { HeadShape } from '../src/reference-upstream/store.js';
import { createTracing } from '../src/telemetry/tracing.js';
import { retryAfterMs } from '../src/upstream/answer.js';
import { login } from '../src/upstream/auth.js';
import { UpstreamError } from '../src/upstream/errors.js';
import {
  deleteHead,
  getHeadById,
  getHeadExt,
  getHeadExtById,
  listHeads,
  listHeadsExt,
  updateHead,
} from '../src/upstream/heads.js';
import { getPermissions } from '../src/upstream/permissions.js';
import { applyRouteOverrides, defaultRoutes, type RouteTable } from '../src/upstream/routes.js';
import { headASchema } from '../src/upstream/schemas.js';
import { updateSubscription } from '../src/upstream/subscriptions.js';
import type { CallContext, UpstreamAttempt } from '../src/upstream/transport.js';
import { createUpstream, type Upstream } from '../src/upstream/upstream.js';
import { freePort } from './support/process.js';
import { until } from './support/until.js';

let reference: ReferenceUpstream;
let upstream: Upstream;
let attempts: UpstreamAttempt[];
let token: string;
const configured = loadConfig({});

function client(options: { timeoutMs?: number; routes?: RouteTable; baseUrl?: string } = {}): Upstream {
  return createUpstream({
    baseUrl: options.baseUrl ?? reference.url,
    routes: options.routes ?? defaultRoutes,
    timeoutMs: options.timeoutMs ?? 2_000,
    connections: 8,
    // The pool's other settings as an operator gets them by default.
    keepAliveTimeoutMs: configured.upstreamKeepAliveMs,
    maxResponseBytes: configured.upstreamMaxResponseBytes,
    retry: {
      limit: 2,
      statusCodes: [502, 503, 504],
      errorCodes: ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET'],
      baseDelayMs: 5,
      maxDelayMs: 20,
    },
    onAttempt: (attempt) => attempts.push(attempt),
    tracing: createTracing(defaultTracingSettings),
  });
}

const anonymous = (extra: Partial<CallContext> = {}) => upstream.forRequest({ requestId: 'req-anon', ...extra });
const authed = (extra: Partial<CallContext> = {}) =>
  upstream.forRequest({ requestId: 'req-auth', authorization: `Bearer ${token}`, ...extra });
const calls = (operation: string) => reference.requests.filter((r) => r.operation === operation);

async function failure(promise: Promise<unknown>): Promise<UpstreamError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UpstreamError);
  return error as UpstreamError;
}

beforeAll(async () => {
  reference = await startReferenceUpstream();
  attempts = [];
  upstream = client();
  token = (await login(anonymous(), DEMO_CREDENTIALS)).access_token;
});

afterAll(async () => {
  await upstream.close();
  await reference.close();
});

beforeEach(() => {
  reference.clearFaults();
  reference.resetRecording();
  attempts = [];
});

describe('operations', () => {
  it('lists heads as a page of variant A, forwarding search and paging', async () => {
    const page = await listHeads(anonymous(), { page: 2, size: 7 });
    expect(page).toMatchObject({ page: 2, size: 7 });
    expect(page.items).toHaveLength(7);
    expect(page.total).toBeGreaterThanOrEqual(250);
    expect(page.items[0]).not.toHaveProperty('head_metadata');
    expect(calls('listHeads')[0]).toMatchObject({ method: 'GET', path: '/v2/heads', query: { page: '2', size: '7' } });

    const first = page.items[0]!;
    const word = first.name.split(' ').at(-1)!;
    const found = await listHeads(anonymous(), { search: word, page: 1, size: 100 });
    expect(found.items.length).toBeGreaterThan(0);
    expect(found.items.every((h) => h.name.toLowerCase().includes(word.toLowerCase()))).toBe(true);
    expect(calls('listHeads')[1]!.query).toMatchObject({ search: word });
  });

  it('reads one head through each by-id read', async () => {
    const { items } = await listHeads(anonymous(), { page: 1, size: 3 });
    const id = items[0]!.id;
    const extA = await getHeadExt(anonymous(), id);
    const b = await getHeadById(anonymous(), id);
    const extB = await getHeadExtById(anonymous(), id);
    expect(extA.id).toBe(id);
    expect(extA.head_metadata).toBeTypeOf('object');
    expect(extA.updated_at).toBeTypeOf('string');
    expect(b.id).toBe(id);
    expect(b.head_metadata).toBeUndefined();
    expect(extB.head_metadata).toEqual(extA.head_metadata);
    expect(reference.requests.map((r) => r.path)).toEqual([
      `/v2/heads`,
      `/v2/heads/${id}/ext`,
      `/v2/head/${id}`,
      `/v2/head/${id}/ext`,
    ]);
  });

  it('lists heads ext with limit and skip in the same order as Get Heads', async () => {
    const page = await listHeads(anonymous(), { page: 2, size: 10 });
    const ext = await listHeadsExt(anonymous(), { limit: 10, skip: 10 });
    expect(ext.map((h) => h.id)).toEqual(page.items.map((h) => h.id));
    expect(ext.every((h) => h.head_metadata !== undefined)).toBe(true);
    expect(calls('listHeadsExt')[0]!.query).toEqual({ limit: '10', skip: '10' });
  });

  it('updates a head with only the fields given, then deletes it with the bearer token', async () => {
    const { items } = await listHeads(anonymous(), { page: 1, size: 5 });
    const id = items[4]!.id;
    const updated = await updateHead(anonymous(), id, { name: 'Renamed by test' });
    expect(updated).toMatchObject({ id, name: 'Renamed by test' });
    expect(calls('updateHead')[0]).toMatchObject({
      method: 'PATCH',
      path: `/v2/heads/${id}`,
      body: { name: 'Renamed by test' },
    });
    expect((await getHeadExt(anonymous(), id)).name).toBe('Renamed by test');

    await expect(deleteHead(authed(), id)).resolves.toBeUndefined();
    expect(calls('deleteHead')[0]).toMatchObject({ method: 'DELETE', status: 204 });
    expect((await failure(getHeadExt(anonymous(), id))).code).toBe('NOT_FOUND');
  });

  it('reads permissions with the token and updates a subscription', async () => {
    const page = await getPermissions(authed(), { page: 1, size: 100 });
    expect(page.items).toHaveLength(100);
    expect(page.total).toBeGreaterThanOrEqual(120);
    const subscription = await updateSubscription(authed(), { active: false });
    expect(subscription.active).toBe(false);
    expect(calls('updateSubscription')[0]!.body).toEqual({ active: false });
    const again = await updateSubscription(authed(), { active: true, platform_type: 'private' });
    expect(again).toMatchObject({ id: subscription.id, active: true, platform_type: 'private' });
  });

  it('logs in with a form and refuses wrong credentials', async () => {
    const answer = await login(anonymous(), DEMO_CREDENTIALS);
    expect(answer.token_type.toLowerCase()).toBe('bearer');
    expect(calls('login')[0]).toMatchObject({
      method: 'POST',
      body: { username: DEMO_CREDENTIALS.username, grant_type: 'password' },
    });
    expect(calls('login')[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect((await failure(login(anonymous(), { username: DEMO_CREDENTIALS.username, password: 'wrong' }))).code).toBe(
      'UNAUTHENTICATED',
    );
  });
});

describe('headers', () => {
  it('forwards the Authorization header verbatim and adds none of its own', async () => {
    const id = (await listHeads(anonymous(), { page: 1, size: 1 })).items[0]!.id;
    await getHeadExt(upstream.forRequest({ requestId: 'r1', authorization: 'Bearer caller-token-1' }), id);
    await listHeads(anonymous(), { page: 1, size: 1 });
    const [, forwarded, withoutToken] = reference.requests;
    expect(forwarded!.headers.authorization).toBe('Bearer caller-token-1');
    expect(withoutToken!.headers.authorization).toBeUndefined();
  });

  it('sends Accept: application/json on GETs and propagates the request id', async () => {
    await listHeads(upstream.forRequest({ requestId: 'trace-42' }), { page: 1, size: 1 });
    expect(reference.requests[0]!.headers.accept).toBe('application/json');
    expect(reference.requests[0]!.headers['x-request-id']).toBe('trace-42');
  });

  it('percent-encodes path ids so an id cannot change the route', async () => {
    const error = await failure(getHeadExt(anonymous(), '../permissions'));
    expect(error.code).toBe('BAD_USER_INPUT');
    expect(reference.requests[0]!.path).toBe('/v2/heads/..%2Fpermissions/ext');
  });
});

describe('error codes', () => {
  const unknownId = '00000000-0000-4000-8000-000000000000';

  it('401 without a token on Get Permissions and Delete Head', async () => {
    expect((await failure(getPermissions(anonymous(), { page: 1, size: 1 }))).code).toBe('UNAUTHENTICATED');
    expect((await failure(deleteHead(anonymous(), unknownId))).code).toBe('UNAUTHENTICATED');
  });

  it('403 for a caller without the right role', async () => {
    reference.injectFault('deleteHead', { kind: 'status', status: 403, body: { detail: 'Not enough permissions' } });
    const error = await failure(deleteHead(authed(), unknownId));
    expect(error).toMatchObject({ code: 'FORBIDDEN', status: 403, operation: 'deleteHead' });
  });

  it('404 for an unknown head', async () => {
    const error = await failure(getHeadExt(anonymous(), unknownId));
    expect(error).toMatchObject({ code: 'NOT_FOUND', status: 404 });
    expect(error.message).toBe('Upstream has no such resource (404)');
    // The route is for logs and metrics only.
    expect(error).toMatchObject({ method: 'GET', path: '/heads/{head_id}/ext' });
  });

  it('422 keeps the detail items', async () => {
    const error = await failure(listHeads(anonymous(), { page: 0, size: 101 }));
    expect(error.code).toBe('BAD_USER_INPUT');
    expect(error.details.map((d) => d.loc)).toEqual([
      ['query', 'page'],
      ['query', 'size'],
    ]);
  });

  it('5xx, non-JSON and off-contract bodies are UPSTREAM_ERROR', async () => {
    reference.injectFault('getPermissions', { kind: 'status', status: 500, body: { detail: 'boom' } });
    expect(await failure(getPermissions(authed(), { page: 1, size: 1 }))).toMatchObject({
      code: 'UPSTREAM_ERROR',
      status: 500,
    });
    reference.injectFault('getPermissions', { kind: 'malformed-json' });
    expect(await failure(getPermissions(authed(), { page: 1, size: 1 }))).toMatchObject({
      code: 'UPSTREAM_ERROR',
      message: expect.stringContaining('not JSON'),
    });
    reference.injectFault('getPermissions', { kind: 'off-contract' });
    expect(await failure(getPermissions(authed(), { page: 1, size: 1 }))).toMatchObject({
      code: 'UPSTREAM_ERROR',
      message: expect.stringContaining('off-contract'),
    });
    expect(calls('getPermissions')).toHaveLength(3);
  });

  it('an empty Get Head By Id array is NOT_FOUND', async () => {
    reference.injectFault('getHeadById', { kind: 'off-contract', body: [] });
    expect((await failure(getHeadById(anonymous(), unknownId))).code).toBe('NOT_FOUND');
  });

  it('a refused connection is UPSTREAM_UNAVAILABLE after the retries', async () => {
    const port = await freePort();
    const closed = client({ baseUrl: `http://127.0.0.1:${port}/v2` });
    try {
      const error = await failure(listHeads(closed.forRequest({ requestId: 'x' }), { page: 1, size: 1 }));
      expect(error.code).toBe('UPSTREAM_UNAVAILABLE');
      expect(attempts.map((a) => a.retry)).toEqual([false, true, true]);
    } finally {
      await closed.close();
    }
  });

  it('reads a body that arrives in pieces and starts with a byte order mark', async () => {
    const id = reference.store.headIds()[0]!;
    const expected = await getHeadById(anonymous(), id);
    const body = Buffer.from(JSON.stringify([expected]));
    const server = createServer((_, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      // The byte order mark, then the body in two writes with a pause between them.
      response.write(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body.subarray(0, 40)]));
      setTimeout(() => response.end(body.subarray(40)), 20);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const pieces = client({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v2` });
    try {
      expect(await getHeadById(pieces.forRequest({ requestId: 'x' }), id)).toEqual(expected);
    } finally {
      await pieces.close();
      server.close();
    }
  });

  it('error messages carry neither the upstream address nor the token', async () => {
    reference.injectFault('getPermissions', { kind: 'drop' }, 3);
    const error = await failure(getPermissions(authed(), { page: 1, size: 1 }));
    const text = `${error.message} ${JSON.stringify(error)}`;
    expect(text).not.toContain('127.0.0.1');
    expect(text).not.toContain(token);
  });
});

describe('retries', () => {
  it('retries a GET after 503 and a dropped connection, then succeeds', async () => {
    reference.injectFault('listHeads', { kind: 'status', status: 503 });
    reference.injectFault('listHeads', { kind: 'drop' });
    const page = await listHeads(anonymous(), { page: 1, size: 2 });
    expect(page.items).toHaveLength(2);
    expect(calls('listHeads')).toHaveLength(3);
    expect(attempts.map((a) => [a.status, a.code, a.retry])).toEqual([
      [503, 'UPSTREAM_ERROR', false],
      [undefined, 'UPSTREAM_UNAVAILABLE', true],
      [200, undefined, true],
    ]);
  });

  it('gives up after two retries', async () => {
    reference.injectFault('getHeadExt', { kind: 'status', status: 502 }, 5);
    const error = await failure(getHeadExt(anonymous(), '00000000-0000-4000-8000-000000000000'));
    expect(error).toMatchObject({ code: 'UPSTREAM_ERROR', status: 502 });
    expect(calls('getHeadExt')).toHaveLength(3);
  });

  it('does not retry a 500 or a 404', async () => {
    reference.injectFault('getHeadExt', { kind: 'status', status: 500 });
    await failure(getHeadExt(anonymous(), '00000000-0000-4000-8000-000000000000'));
    await failure(getHeadExt(anonymous(), '00000000-0000-4000-8000-000000000000'));
    expect(calls('getHeadExt')).toHaveLength(2);
  });

  it('never retries PATCH, DELETE or POST', async () => {
    const id = (await listHeads(anonymous(), { page: 1, size: 1 })).items[0]!.id;
    reference.resetRecording();
    reference.injectFault('updateHead', { kind: 'status', status: 503 });
    reference.injectFault('deleteHead', { kind: 'drop' });
    reference.injectFault('login', { kind: 'status', status: 502 });
    reference.injectFault('updateSubscription', { kind: 'drop' });
    expect((await failure(updateHead(anonymous(), id, { name: 'x' }))).code).toBe('UPSTREAM_ERROR');
    // Dropped after the upstream read the request: it may have been applied.
    expect((await failure(deleteHead(authed(), id))).code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    expect((await failure(login(anonymous(), DEMO_CREDENTIALS))).code).toBe('UPSTREAM_ERROR');
    expect((await failure(updateSubscription(authed(), { active: true }))).code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
    expect(reference.requests.map((r) => r.operation)).toEqual([
      'updateHead',
      'deleteHead',
      'login',
      'updateSubscription',
    ]);
  });
});

describe('timeout and abort', () => {
  it('a slow upstream is UPSTREAM_TIMEOUT within the call timeout, retries included', async () => {
    // On a fake clock: a 503 at 0 ms, the retry after its backoff (under 30 ms with this
    // client's policy), held by the upstream; the call's one timeout, 1 s from its start, cuts
    // the retry (a timeout per attempt would give it until 1 s after the backoff).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const slow = client({ timeoutMs: 1_000 });
    try {
      reference.injectFault('listHeads', { kind: 'status', status: 503 });
      reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
      const pending = failure(listHeads(slow.forRequest({ requestId: 't' }), { page: 1, size: 1 }));
      await until(() => attempts.length === 1, 'the 503 attempt');
      vi.advanceTimersByTime(30);
      await until(() => reference.inFlight() === 1, 'the retry held at the upstream');
      vi.advanceTimersByTime(970);
      expect((await pending).code).toBe('UPSTREAM_TIMEOUT');
      expect(calls('listHeads')).toHaveLength(2);
      expect(attempts.map((a) => [a.code, a.retry])).toEqual([
        ['UPSTREAM_ERROR', false],
        ['UPSTREAM_TIMEOUT', true],
      ]);
    } finally {
      vi.useRealTimers();
      await slow.close();
    }
  });

  it('a change sent and not answered in time is UPSTREAM_OUTCOME_UNKNOWN, sent once', async () => {
    const slow = client({ timeoutMs: 150 });
    try {
      const id = (await listHeads(anonymous(), { page: 1, size: 1 })).items[0]!.id;
      reference.resetRecording();
      reference.injectFault('updateHead', { kind: 'latency', ms: 1_000 });
      const error = await failure(updateHead(slow.forRequest({ requestId: 't' }), id, { name: 'late' }));
      expect(error.code).toBe('UPSTREAM_OUTCOME_UNKNOWN');
      expect(error.message).toMatch(/may have been applied/);
      expect(calls('updateHead')).toHaveLength(1);
    } finally {
      await slow.close();
    }
  });

  it('honours the caller abort signal and is not retried', async () => {
    reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
    const controller = new AbortController();
    const pending = listHeads(anonymous({ signal: controller.signal }), { page: 1, size: 1 });
    await until(() => reference.inFlight() === 1);
    controller.abort();
    expect((await failure(pending)).code).toBe('ABORTED');
    expect(calls('listHeads')).toHaveLength(1);
    await until(() => reference.inFlight() === 0);
  });
});

describe('body schemas', () => {
  const head = () => {
    const seeded = reference.store.findHead(reference.store.headIds()[0]!)!;
    return structuredClone(reference.store.project(seeded, HeadShape.A_EXT)) as Record<string, any>;
  };

  it('passes an object the contract leaves open through as it is, and refuses anything else there', () => {
    const body = head();
    body.lod = { levels: 3, nested: { deep: [1, { x: null }] } };
    expect(headASchema.parse(body).lod).toEqual(body.lod);
    for (const bad of [[1, 2], 'lod', 7, true])
      expect(headASchema.safeParse({ ...head(), lod: bad }).success).toBe(false);
    expect(headASchema.safeParse({ ...head(), lod: null }).success).toBe(true);
    expect(headASchema.safeParse({ ...head(), hair: { ...head().hair, obj_metadata: [] } }).success).toBe(false);
  });

  it('reads a timestamp without an offset as UTC, keeps one with an offset, refuses one that is not a timestamp', () => {
    expect(headASchema.parse({ ...head(), created_at: '2024-01-01T05:00:00' }).created_at).toBe('2024-01-01T05:00:00Z');
    expect(headASchema.parse({ ...head(), created_at: '2024-01-01T05:00:00+02:00' }).created_at).toBe(
      '2024-01-01T05:00:00+02:00',
    );
    expect(headASchema.safeParse({ ...head(), created_at: 'yesterday' }).success).toBe(false);
  });
});

describe('routes', () => {
  it('follows an overridden route table', async () => {
    const routes = applyRouteOverrides({
      getHeadExt: { path: '/heads/{head_id}/extended' },
      updateSubscription: { method: 'PUT' },
    });
    const moved = await startReferenceUpstream({ routes });
    const movedClient = client({ baseUrl: moved.url, routes });
    try {
      const id = (await listHeads(movedClient.forRequest({ requestId: 'm' }), { page: 1, size: 1 })).items[0]!.id;
      const head = await getHeadExt(movedClient.forRequest({ requestId: 'm' }), id);
      expect(headASchema.parse(head).id).toBe(id);
      expect(moved.requests.at(-1)!.path).toBe(`/v2/heads/${id}/extended`);
    } finally {
      await movedClient.close();
      await moved.close();
    }
  });

  it('refuses an unknown operation, a bad method and a path missing its placeholder', () => {
    expect(() => applyRouteOverrides({ getHead: { path: '/x' } })).toThrow(/unknown operation/);
    expect(() => applyRouteOverrides({ listHeads: { method: 'FETCH' } })).toThrow(/method must be one of/);
    expect(() => applyRouteOverrides({ getHeadExt: { path: '/heads/ext' } })).toThrow(
      /getHeadExt\.path: path must contain \{head_id\}/,
    );
    expect(() => applyRouteOverrides({ listHeads: { path: '/heads/{id}' } })).toThrow(/takes no placeholder/);
  });
});

afterEach(() => reference.clearFaults());

describe("an upstream's Retry-After (on its 429)", () => {
  const now = Date.parse('2026-11-27T10:00:00Z');
  it.each([
    ['7', 7_000],
    [' 0 ', 0],
    ['Fri, 27 Nov 2026 10:02:00 GMT', 120_000],
    ['Fri, 27 Nov 2026 09:00:00 GMT', 0],
    ['86400', 3_600_000],
    ['soon', undefined],
    ['-5', undefined],
    ['1.5', undefined],
    [undefined, undefined],
  ])('%j is %j ms from now (an hour at most; undefined when unreadable)', (value, ms) => {
    expect(retryAfterMs(value, now)).toBe(ms);
  });
});
