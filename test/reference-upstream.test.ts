import { Agent, request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  ALICE_PASSWORD,
  ALICE_USERNAME,
  createSeed,
  DEMO_CREDENTIALS,
  HEAD_COUNT,
  type ReferenceSeed,
  referenceSeed,
  unattachedHairIds,
  VIEWER_PASSWORD,
  VIEWER_USERNAME,
} from '../src/reference-upstream/seed.js';
import { SeedValidationError, validateSeed } from '../src/reference-upstream/seed-validation.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { ReferenceStore } from '../src/reference-upstream/store.js';
import { applyRouteOverrides, defaultRoutes, fillPath } from '../src/upstream/routes.js';
import {
  headAPageSchema,
  headASchema,
  headBListSchema,
  headBSchema,
  loginResponseSchema,
  permissionPageSchema,
  sourceTypes,
  subscriptionSchema,
  userRoles,
  validationErrorSchema,
} from '../src/upstream/schemas.js';
import { until } from './support/until.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000';

let upstream: ReferenceUpstream;
let agent: Agent;
let adminToken: string;
let viewerToken: string;
const seed = referenceSeed();

interface CallOptions {
  query?: Record<string, string | number>;
  headers?: Record<string, string>;
  json?: unknown;
  form?: Record<string, string>;
  raw?: string;
  token?: string;
  signal?: AbortSignal;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: unknown;
}

async function call(method: string, path: string, options: CallOptions = {}, base = upstream.url): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined = options.raw;
  if (options.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(options.json);
  }
  if (options.form !== undefined) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(options.form).toString();
  }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const query =
    options.query === undefined
      ? ''
      : `?${new URLSearchParams(Object.entries(options.query).map(([k, v]) => [k, String(v)]))}`;
  const answer = await request(`${base}${path}${query}`, {
    method: method as 'GET',
    headers,
    body,
    dispatcher: agent,
    signal: options.signal,
  });
  const text = await answer.body.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: answer.statusCode, headers: answer.headers, text, body: parsed };
}

const path = (operation: keyof typeof defaultRoutes, params: Record<string, string> = {}) =>
  fillPath(defaultRoutes[operation], params);
const firstIds = (n: number, server: ReferenceUpstream = upstream) => server.store.headIds().slice(0, n);

/** The loc/type pairs of a 422, after checking the body is FastAPI's validation error. */
function issues(answer: Answer): [string, string][] {
  expect(answer.status).toBe(422);
  return validationErrorSchema.parse(answer.body).detail.map((d) => [d.loc.join('.'), d.type]);
}

async function login(username: string, password: string, base = upstream.url): Promise<string> {
  const answer = await call('POST', path('login'), { form: { username, password, grant_type: 'password' } }, base);
  expect(answer.status).toBe(200);
  return loginResponseSchema.parse(answer.body).access_token;
}

beforeAll(async () => {
  agent = new Agent({ keepAliveTimeout: 1_000 });
  upstream = await startReferenceUpstream();
  adminToken = await login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password);
  viewerToken = await login(VIEWER_USERNAME, VIEWER_PASSWORD);
});

afterAll(async () => {
  await upstream.close();
  await agent.close();
});

beforeEach(() => {
  upstream.clearFaults();
  upstream.resetRecording();
});

describe('seed', () => {
  it('is deterministic and has the promised spread', () => {
    expect(createSeed()).toEqual(seed);
    expect(seed.heads).toHaveLength(HEAD_COUNT);
    const withHair = seed.heads.filter((h) => h.hair_id !== undefined).length;
    expect(withHair / seed.heads.length).toBeCloseTo(0.85, 2);
    expect(new Set(seed.hairs.map((h) => h.source_type))).toEqual(new Set(sourceTypes));
    expect(seed.hairs.filter((h) => h.payable_data !== undefined).length).toBeGreaterThan(0);
    expect(seed.permissions.length).toBeGreaterThanOrEqual(130);
    expect(new Set(seed.permissions.map((p) => p.role))).toEqual(new Set(userRoles));
    expect(seed.subscriptionTypes).toHaveLength(4);
    expect(seed.subscriptionTypes.filter((t) => t.statement_descriptor === undefined)).toHaveLength(1);
    expect(seed.subscriptionTypes.every((t) => [1, 2, 3, 6, 12].includes(t.payment_cycle))).toBe(true);
    expect(seed.organizations).toHaveLength(3);
    expect(new Set(seed.subscriptions.map((s) => s.organization_id))).toEqual(
      new Set(seed.organizations.map((o) => o.id)),
    );
    expect(unattachedHairIds()).toHaveLength(10);
    const ids = [
      ...seed.heads,
      ...seed.hairs,
      ...seed.permissions,
      ...seed.subscriptionTypes,
      ...seed.organizations,
      ...seed.subscriptions,
    ].map((x) => x.id);
    expect(ids.every((id) => UUID_V4.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('refuses a 101-character hair name and a 23-character statement descriptor', () => {
    const longHair: ReferenceSeed = structuredClone(seed);
    longHair.hairs[0]!.name = 'x'.repeat(101);
    expect(() => validateSeed(longHair)).toThrow(SeedValidationError);
    expect(() => new ReferenceStore(longHair)).toThrow(/longer than 100/);

    const longDescriptor: ReferenceSeed = structuredClone(seed);
    longDescriptor.subscriptionTypes[0]!.statement_descriptor = 'D'.repeat(23);
    expect(() => validateSeed(longDescriptor)).toThrow(/statement_descriptor longer than 22/);

    const atLimits: ReferenceSeed = structuredClone(seed);
    atLimits.hairs[0]!.name = 'x'.repeat(100);
    atLimits.subscriptionTypes[0]!.statement_descriptor = 'D'.repeat(22);
    expect(() => validateSeed(atLimits)).not.toThrow();
  });
});

describe('reads', () => {
  it('Get Heads pages variant A without head_metadata, 50 by default', async () => {
    const first = await call('GET', path('listHeads'));
    expect(first.status).toBe(200);
    expect(first.headers['content-type']).toBe('application/json');
    const page = headAPageSchema.parse(first.body);
    expect(page).toMatchObject({ total: HEAD_COUNT, page: 1, size: 50, pages: Math.ceil(HEAD_COUNT / 50) });
    expect(page.items).toHaveLength(50);
    expect((first.body as { items: object[] }).items.every((h) => !('head_metadata' in h))).toBe(true);
    expect(page.items.filter((h) => h.hair !== undefined).length).toBeGreaterThan(30);

    const last = headAPageSchema.parse((await call('GET', path('listHeads'), { query: { page: 6, size: 50 } })).body);
    expect(last.items).toHaveLength(HEAD_COUNT - 250);
    const beyond = headAPageSchema.parse(
      (await call('GET', path('listHeads'), { query: { page: 99, size: 100 } })).body,
    );
    expect(beyond).toMatchObject({ items: [], total: HEAD_COUNT, pages: 3 });
  });

  it('search is a case-insensitive name substring and style matches the label', async () => {
    const word = seed.heads[0]!.name.split(' ').at(-1)!;
    const found = headAPageSchema.parse(
      (await call('GET', path('listHeads'), { query: { search: word.toUpperCase(), size: 100 } })).body,
    );
    expect(found.total).toBeGreaterThan(0);
    expect(found.total).toBeLessThan(HEAD_COUNT / 5);
    expect(found.items.every((h) => h.name.includes(word))).toBe(true);

    const anime = headAPageSchema.parse(
      (await call('GET', path('listHeads'), { query: { style: 'ANIME', size: 100 } })).body,
    );
    const expected = seed.heads.filter((h) => h.style?.label === 'anime').length;
    expect(anime.total).toBe(expected);
    expect(anime.items.every((h) => h.style?.label === 'anime')).toBe(true);

    const both = headAPageSchema.parse(
      (await call('GET', path('listHeads'), { query: { search: 'head 00', style: 'anime' } })).body,
    );
    expect(both.items.every((h) => h.name.startsWith('Head 00') && h.style?.label === 'anime')).toBe(true);
  });

  it('Get Heads and Get Heads Ext list the same ids in the same order', async () => {
    const viaPages: string[] = [];
    for (let page = 1; page <= 3; page++) {
      viaPages.push(
        ...headAPageSchema
          .parse((await call('GET', path('listHeads'), { query: { page, size: 100 } })).body)
          .items.map((h) => h.id),
      );
    }
    const ext = headBListSchema.parse((await call('GET', path('listHeadsExt'), { query: { limit: 1000 } })).body);
    expect(ext.map((h) => h.id)).toEqual(viaPages);
    expect(ext.every((h) => h.head_metadata !== undefined)).toBe(true);
    const created = ext.map((h) => h.created_at);
    expect([...created].sort()).toEqual(created);

    const defaults = headBListSchema.parse(await call('GET', path('listHeadsExt')).then((a) => a.body));
    expect(defaults.map((h) => h.id)).toEqual(viaPages.slice(0, 10));
    const window = headBListSchema.parse(
      (await call('GET', path('listHeadsExt'), { query: { skip: 5, limit: 3 } })).body,
    );
    expect(window.map((h) => h.id)).toEqual(viaPages.slice(5, 8));
  });

  it('each by-id read returns its shape', async () => {
    const withLod = seed.heads.find((h) => h.lod !== undefined && h.hair_id !== undefined && h.ar_url !== undefined)!;
    const extA = await call('GET', path('getHeadExt', { head_id: withLod.id }));
    const a = headASchema.parse(extA.body);
    expect(a).toMatchObject({
      id: withLod.id,
      head_metadata: withLod.head_metadata,
      ar_url: withLod.ar_url,
      lod: withLod.lod,
    });
    expect(a.hair?.id).toBe(withLod.hair_id);

    const byId = await call('GET', path('getHeadById', { id: withLod.id }));
    const list = headBListSchema.parse(byId.body);
    expect(list).toHaveLength(1);
    expect(byId.body as object[]).not.toHaveProperty('0.head_metadata');
    expect(byId.body as object[]).not.toHaveProperty('0.updated_at');
    expect(list[0]!.hair).toMatchObject({ id: withLod.hair_id, hair_metadata: expect.any(Object) });

    const extB = headBSchema.parse((await call('GET', path('getHeadExtById', { id: withLod.id.toUpperCase() }))).body);
    expect(extB).toMatchObject({ id: withLod.id, head_metadata: withLod.head_metadata });
  });

  it('Get Permissions pages with the token', async () => {
    const answer = await call('GET', path('getPermissions'), {
      token: viewerToken,
      headers: { accept: 'application/json' },
    });
    const page = permissionPageSchema.parse(answer.body);
    expect(page).toMatchObject({ total: seed.permissions.length, page: 1, size: 50, pages: 3 });
    const last = permissionPageSchema.parse(
      (await call('GET', path('getPermissions'), { token: adminToken, query: { page: 2, size: 100 } })).body,
    );
    expect(last.items.map((p) => p.id)).toEqual(seed.permissions.slice(100).map((p) => p.id));
  });
});

describe('validation (422)', () => {
  it('path ids must be UUIDs', async () => {
    expect(issues(await call('GET', path('getHeadExt', { head_id: 'not-a-uuid' })))).toEqual([
      ['path.head_id', 'uuid_parsing'],
    ]);
    expect(issues(await call('GET', path('getHeadById', { id: '123' })))).toEqual([['path.id', 'uuid_parsing']]);
    expect(issues(await call('GET', path('getHeadExtById', { id: UNKNOWN_ID.slice(1) })))).toEqual([
      ['path.id', 'uuid_parsing'],
    ]);
    const detail = validationErrorSchema.parse((await call('GET', path('getHeadById', { id: 'zz' }))).body).detail[0]!;
    expect(detail.msg).toMatch(/^Input should be a valid UUID, /);
  });

  it('page, size, limit and skip bounds and integer parsing', async () => {
    expect(issues(await call('GET', path('listHeads'), { query: { page: 0 } }))).toEqual([
      ['query.page', 'greater_than_equal'],
    ]);
    expect(issues(await call('GET', path('listHeads'), { query: { size: 0 } }))).toEqual([
      ['query.size', 'greater_than_equal'],
    ]);
    expect(issues(await call('GET', path('listHeads'), { query: { page: 0, size: 101 } }))).toEqual([
      ['query.page', 'greater_than_equal'],
      ['query.size', 'less_than_equal'],
    ]);
    expect(
      issues(await call('GET', path('getPermissions'), { token: adminToken, query: { page: 'x', size: '1.5' } })),
    ).toEqual([
      ['query.page', 'int_parsing'],
      ['query.size', 'int_parsing'],
    ]);
    expect(issues(await call('GET', path('listHeadsExt'), { query: { limit: 0, skip: -1 } }))).toEqual([
      ['query.limit', 'greater_than_equal'],
      ['query.skip', 'greater_than_equal'],
    ]);
    expect(issues(await call('GET', path('listHeadsExt'), { query: { limit: 1001 } }))).toEqual([
      ['query.limit', 'less_than_equal'],
    ]);
  });

  it('Update Head reports every wrong field together', async () => {
    const id = firstIds(1)[0]!;
    const answer = await call('PATCH', path('updateHead', { head_id: id }), {
      json: {
        name: 'x'.repeat(101),
        output_format: 'glb',
        style: [],
        version: 2,
        head_metadata: 'm',
        hair_id: 'nope',
        hair_color: 7,
      },
    });
    expect(issues(answer)).toEqual([
      ['body.name', 'string_too_long'],
      ['body.output_format', 'dict_type'],
      ['body.style', 'dict_type'],
      ['body.version', 'dict_type'],
      ['body.head_metadata', 'dict_type'],
      ['body.hair_id', 'uuid_parsing'],
      ['body.hair_color', 'string_type'],
    ]);
    expect(
      issues(await call('PATCH', path('updateHead', { head_id: 'bad' }), { json: { name: 5, hair_id: UNKNOWN_ID } })),
    ).toEqual([
      ['path.head_id', 'uuid_parsing'],
      ['body.name', 'string_type'],
      ['body.hair_id', 'value_error'],
    ]);
    expect(upstream.store.findHead(id)!.head.name).toBe(seed.heads.find((h) => h.id === id)!.name);
  });

  it('bodies that are not JSON objects', async () => {
    const target = path('updateHead', { head_id: firstIds(1)[0]! });
    expect(issues(await call('PATCH', target, { json: [1, 2] }))).toEqual([['body', 'model_attributes_type']]);
    expect(
      issues(await call('PATCH', target, { raw: '{"name":', headers: { 'content-type': 'application/json' } })),
    ).toEqual([['body', 'json_invalid']]);
    expect(issues(await call('PATCH', target))).toEqual([['body', 'missing']]);
  });

  it('Update Subscription field types, enum and unknown subscription type', async () => {
    const answer = await call('PATCH', path('updateSubscription'), {
      json: {
        organization_id: 'org',
        platform_type: 'secret',
        expire_at: 5,
        active: 'maybe',
        subscription_type_id: UNKNOWN_ID,
      },
    });
    expect(issues(answer)).toEqual([
      ['body.organization_id', 'uuid_parsing'],
      ['body.platform_type', 'enum'],
      ['body.expire_at', 'string_type'],
      ['body.active', 'bool_parsing'],
      ['body.subscription_type_id', 'value_error'],
    ]);
    expect(validationErrorSchema.parse(answer.body).detail[1]!.msg).toBe("Input should be 'public' or 'private'");
    expect(issues(await call('PATCH', path('updateSubscription'), { json: { active: true } }))).toEqual([
      ['body.organization_id', 'missing'],
    ]);
    expect(
      issues(await call('PATCH', path('updateSubscription'), { json: { active: true }, token: viewerToken })),
    ).toEqual([['body.organization_id', 'missing']]);
  });

  it('login form fields', async () => {
    expect(issues(await call('POST', path('login'), { form: { password: 'x' } }))).toEqual([
      ['body.username', 'missing'],
    ]);
    expect(
      issues(await call('POST', path('login'), { json: { username: 'demo', password: 'demo-password' } })),
    ).toEqual([
      ['body.username', 'missing'],
      ['body.password', 'missing'],
    ]);
    expect(
      issues(await call('POST', path('login'), { form: { ...DEMO_CREDENTIALS, grant_type: 'client_credentials' } })),
    ).toEqual([['body.grant_type', 'string_pattern_mismatch']]);
  });
});

describe('auth, 404 and routing', () => {
  it('401 without a valid bearer on Delete Head and Get Permissions', async () => {
    for (const answer of [
      await call('GET', path('getPermissions')),
      await call('GET', path('getPermissions'), { token: 'forged' }),
      await call('DELETE', path('deleteHead', { head_id: UNKNOWN_ID })),
      await call('DELETE', path('deleteHead', { head_id: 'not-even-a-uuid' }), {
        headers: { authorization: 'Basic abc' },
      }),
    ]) {
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual({ detail: 'Not authenticated' });
      expect(answer.headers['www-authenticate']).toBe('Bearer');
    }
  });

  it('403 for the default role, and other operations ignore a bad token', async () => {
    const id = firstIds(3)[2]!;
    const answer = await call('DELETE', path('deleteHead', { head_id: id }), { token: viewerToken });
    expect(answer).toMatchObject({ status: 403, body: { detail: 'Not enough permissions' } });
    expect(upstream.store.findHead(id)).toBeDefined();
    expect((await call('GET', path('getHeadExt', { head_id: id }), { token: 'forged' })).status).toBe(200);
  });

  it('login: wrong credentials 401, issued tokens differ per login', async () => {
    const wrong = await call('POST', path('login'), { form: { username: 'demo', password: 'nope' } });
    expect(wrong).toMatchObject({ status: 401, body: { detail: 'Incorrect username or password' } });
    const again = await login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password);
    expect(again).not.toBe(adminToken);
    expect((await call('GET', path('getPermissions'), { token: again, query: { size: 1 } })).status).toBe(200);
    expect(
      (await call('POST', path('login'), { form: { username: 'demo', password: 'demo-password' } })).body,
    ).toMatchObject({ token_type: 'bearer' });
  });

  it('404 for an unknown head on every by-id route', async () => {
    const notFound = { status: 404, body: { detail: 'Head not found' } };
    expect(await call('GET', path('getHeadExt', { head_id: UNKNOWN_ID }))).toMatchObject(notFound);
    expect(await call('GET', path('getHeadById', { id: UNKNOWN_ID }))).toMatchObject(notFound);
    expect(await call('GET', path('getHeadExtById', { id: UNKNOWN_ID }))).toMatchObject(notFound);
    expect(await call('PATCH', path('updateHead', { head_id: UNKNOWN_ID }), { json: {} })).toMatchObject(notFound);
    expect(await call('DELETE', path('deleteHead', { head_id: UNKNOWN_ID }), { token: adminToken })).toMatchObject(
      notFound,
    );
  });

  it('unknown path 404, known path with another method 405', async () => {
    expect(await call('GET', '/nothing')).toMatchObject({ status: 404, body: { detail: 'Not Found' } });
    expect(await call('GET', '/heads/')).toMatchObject({ status: 404 });
    expect(await call('PUT', path('updateHead', { head_id: UNKNOWN_ID }))).toMatchObject({
      status: 405,
      body: { detail: 'Method Not Allowed' },
    });
    expect(await call('GET', '/v1/heads', {}, upstream.url.replace(/\/v2$/, ''))).toMatchObject({ status: 404 });
    expect(upstream.requests.map((r) => r.operation)).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('serves an overridden route table', async () => {
    const routes = applyRouteOverrides({
      listHeadsExt: { path: '/heads-ext' },
      updateSubscription: { method: 'PUT', path: '/subscription' },
    });
    const moved = await startReferenceUpstream({ routes, record: false });
    try {
      expect((await call('GET', '/heads-ext', { query: { limit: 2 } }, moved.url)).status).toBe(200);
      expect((await call('GET', '/heads/ext', {}, moved.url)).status).toBe(405);
      expect((await call('PUT', '/subscription', { json: {}, token: adminToken }, moved.url)).status).toBe(422);
      expect(moved.countsByOperation()).toMatchObject({ listHeadsExt: 1, updateSubscription: 1 });
    } finally {
      await moved.close();
    }
  });
});

describe('mutations', () => {
  // On a server of their own: the read tests expect the seed as it is, whatever order they run in.
  let own: ReferenceUpstream;
  let ownAdminToken: string;
  const ownCall = (method: string, route: string, options: CallOptions = {}) => call(method, route, options, own.url);

  beforeAll(async () => {
    own = await startReferenceUpstream();
    ownAdminToken = await login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password, own.url);
  });

  afterAll(() => own.close());

  it('Update Head applies only the given fields and bumps updated_at', async () => {
    const id = firstIds(5, own)[4]!;
    const before = headASchema.parse((await ownCall('GET', path('getHeadExt', { head_id: id }))).body);
    const hairId = unattachedHairIds()[0]!;
    const answer = await ownCall('PATCH', path('updateHead', { head_id: id }), {
      json: {
        name: 'Renamed Aurora',
        style: { label: 'anime' },
        hair_id: hairId,
        hair_color: 'teal',
        head_metadata: { polygons: 1 },
      },
    });
    expect(answer.status).toBe(200);
    expect(answer.body).not.toHaveProperty('head_metadata');
    const updated = headASchema.parse(answer.body);
    expect(updated).toMatchObject({
      id,
      name: 'Renamed Aurora',
      style: { label: 'anime' },
      output_format: before.output_format,
      version: before.version,
    });
    expect(updated.hair).toMatchObject({ id: hairId, obj_metadata: { color: 'teal' } });
    expect(updated.updated_at > before.updated_at).toBe(true);

    const after = headASchema.parse((await ownCall('GET', path('getHeadExt', { head_id: id }))).body);
    expect(after).toMatchObject({ name: 'Renamed Aurora', head_metadata: { polygons: 1 }, hair: { id: hairId } });
    const search = headAPageSchema.parse(
      (await ownCall('GET', path('listHeads'), { query: { search: 'renamed aur' } })).body,
    );
    expect(search.items.map((h) => h.id)).toEqual([id]);

    const unchanged = headASchema.parse(
      (await ownCall('PATCH', path('updateHead', { head_id: id }), { json: {} })).body,
    );
    expect(unchanged.name).toBe('Renamed Aurora');
  });

  it('hair_color on a head without hair is refused', async () => {
    const bald = own.store.selectHeads().find((e) => e.head.hair_id === undefined)!.head;
    expect(
      issues(await ownCall('PATCH', path('updateHead', { head_id: bald.id }), { json: { hair_color: 'red' } })),
    ).toEqual([['body.hair_color', 'value_error']]);
  });

  it('Delete Head removes it from every read', async () => {
    const id = firstIds(2, own)[1]!;
    expect(await ownCall('DELETE', path('deleteHead', { head_id: id }), { token: ownAdminToken })).toMatchObject({
      status: 204,
      text: '',
    });
    expect((await ownCall('GET', path('getHeadById', { id }))).status).toBe(404);
    const page = headAPageSchema.parse((await ownCall('GET', path('listHeads'), { query: { size: 100 } })).body);
    expect(page.total).toBe(own.store.headCount);
    expect(page.items.map((h) => h.id)).not.toContain(id);
  });

  it('Update Subscription selects by body organization or by the token', async () => {
    const [northwind, lumen] = seed.organizations;
    const enterprise = seed.subscriptionTypes.find((t) => t.tag === 'enterprise')!;
    const byToken = subscriptionSchema.parse(
      (await ownCall('PATCH', path('updateSubscription'), { json: { active: false }, token: ownAdminToken })).body,
    );
    expect(byToken).toMatchObject({ organization_id: northwind!.id, active: false });

    const aliceToken = await login(ALICE_USERNAME, ALICE_PASSWORD, own.url);
    const before = own.store.subscriptionForOrganization(lumen!.id)!.updated_at;
    const answer = await ownCall('PATCH', path('updateSubscription'), {
      json: {
        organization_id: lumen!.id,
        platform_type: 'private',
        expire_at: '2030-01-01T00:00:00Z',
        subscription_type_id: enterprise.id,
      },
      token: aliceToken,
    });
    const swapped = subscriptionSchema.parse(answer.body);
    expect(swapped).toMatchObject({
      organization_id: lumen!.id,
      platform_type: 'private',
      expire_at: '2030-01-01T00:00:00Z',
      subscription_type: { id: enterprise.id, tag: 'enterprise' },
    });
    expect(swapped.updated_at > before).toBe(true);
    expect(own.store.subscriptionForOrganization(lumen!.id)!.subscription_type_id).toBe(enterprise.id);

    expect(await ownCall('PATCH', path('updateSubscription'), { json: { organization_id: UNKNOWN_ID } })).toMatchObject(
      { status: 404 },
    );
  });
});

describe('recording', () => {
  it('records method, path, query, headers, body and status', async () => {
    const id = firstIds(1)[0]!;
    await call('GET', path('listHeads'), { query: { page: 2, search: 'a b' }, headers: { 'x-request-id': 'r-1' } });
    await call('PATCH', path('updateHead', { head_id: id }), { json: { hair_color: 'black' } });
    await call('POST', path('login'), { form: { ...DEMO_CREDENTIALS } });
    const [list, update, signIn] = upstream.requests;
    expect(list).toMatchObject({
      operation: 'listHeads',
      method: 'GET',
      path: '/v2/heads',
      query: { page: '2', search: 'a b' },
      body: undefined,
      status: 200,
    });
    expect(list!.headers['x-request-id']).toBe('r-1');
    expect(list!.endedAt!).toBeGreaterThanOrEqual(list!.startedAt);
    expect(update).toMatchObject({
      operation: 'updateHead',
      method: 'PATCH',
      path: `/v2/heads/${id}`,
      query: {},
      body: { hair_color: 'black' },
      status: 200,
    });
    expect(signIn).toMatchObject({
      operation: 'login',
      body: { username: 'demo', password: 'demo-password' },
      status: 200,
    });
    expect(upstream.countsByOperation()).toMatchObject({ listHeads: 1, updateHead: 1, login: 1, getHeadExt: 0 });
    expect(upstream.inFlight()).toBe(0);
  });

  it('records the W3C traceparent it receives, on every route and on a 404', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await call('GET', path('getHeadExt', { head_id: firstIds(1)[0]! }), { headers: { traceparent } });
    await call('POST', path('login'), {
      form: { ...DEMO_CREDENTIALS },
      headers: { traceparent: traceparent.replace(/01$/, '00') },
    });
    await call('GET', '/nothing', { headers: { traceparent } });
    await call('GET', path('listHeads'));
    expect(upstream.requests.map((r) => [r.operation, r.traceparent])).toEqual([
      ['getHeadExt', traceparent],
      ['login', traceparent.replace(/01$/, '00')],
      [undefined, traceparent],
      ['listHeads', undefined],
    ]);
  });
});

describe('faults', () => {
  const target = () => path('getHeadExt', { head_id: firstIds(1)[0]! });

  it('latency delays an answer by its ms', async () => {
    // On a fake clock: held at 149 ms, answered at 150.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      upstream.injectFault('getHeadExt', { kind: 'latency', ms: 150 });
      let settled = false;
      const pending = call('GET', target()).finally(() => (settled = true));
      await until(() => upstream.inFlight() === 1, 'the answer held');
      vi.advanceTimersByTime(149);
      expect(upstream.inFlight()).toBe(1);
      expect(settled).toBe(false);
      vi.advanceTimersByTime(1);
      const answer = await pending;
      expect(answer.status).toBe(200);
      headASchema.parse(answer.body);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a held answer blocks no other request, and releaseHeld answers it at once', async () => {
    upstream.injectFault('getHeadExt', { kind: 'latency', ms: 600_000 });
    let settled = false;
    const slow = call('GET', target()).finally(() => (settled = true));
    await until(() => upstream.inFlight() === 1);
    const fast = await call('GET', path('listHeads'), { query: { size: 1 } });
    expect(fast.status).toBe(200);
    expect(upstream.maxInFlight()).toBe(2);
    expect(settled).toBe(false);
    expect(upstream.releaseHeld()).toBe(1);
    const answer = await slow;
    expect(answer.status).toBe(200);
    headASchema.parse(answer.body);
    expect(upstream.releaseHeld()).toBe(0);
    expect(upstream.inFlight()).toBe(0);
  });

  it('an aborted client during latency gets nothing and frees its slot', async () => {
    upstream.injectFault('getHeadExt', { kind: 'latency', ms: 600_000 });
    const controller = new AbortController();
    const pending = call('GET', target(), { signal: controller.signal });
    await until(() => upstream.inFlight() === 1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await until(() => upstream.inFlight() === 0);
    // Nothing is left to release: the slot went with the client.
    expect(upstream.releaseHeld()).toBe(0);
    expect(upstream.requests[0]!.operation).toBe('getHeadExt');
    expect(upstream.requests[0]!.status).toBeUndefined();
    expect(upstream.requests[0]!.endedAt).toBeDefined();
  });

  it('status, malformed JSON and off-contract bodies', async () => {
    upstream.injectFault('getHeadExt', { kind: 'status', status: 503 });
    upstream.injectFault('getHeadExt', { kind: 'status', status: 500, body: { detail: 'boom' } });
    upstream.injectFault('getHeadExt', { kind: 'malformed-json' });
    upstream.injectFault('getHeadExt', { kind: 'off-contract' });
    expect(await call('GET', target())).toMatchObject({ status: 503, body: { detail: 'Service Unavailable' } });
    expect(await call('GET', target())).toMatchObject({ status: 500, body: { detail: 'boom' } });
    const malformed = await call('GET', target());
    expect(malformed.status).toBe(200);
    expect(() => JSON.parse(malformed.text)).toThrow();
    const off = await call('GET', target());
    expect(off.status).toBe(200);
    expect(headASchema.safeParse(off.body).success).toBe(false);
    expect((await call('GET', target())).status).toBe(200);
    expect(upstream.requests.map((r) => r.status)).toEqual([503, 500, 200, 200, 200]);
  });

  it('drop destroys the socket; a fault covers exactly its N requests', async () => {
    upstream.injectFault('getHeadExt', { kind: 'drop' }, 2);
    await expect(call('GET', target())).rejects.toThrow(/other side closed|socket|ECONNRESET/i);
    await expect(call('GET', target())).rejects.toThrow();
    expect((await call('GET', target())).status).toBe(200);
    expect(upstream.countsByOperation().getHeadExt).toBe(3);
    expect(upstream.requests.map((r) => r.status)).toEqual([undefined, undefined, 200]);
    expect(upstream.inFlight()).toBe(0);
  });

  it('faults are per operation and clearFaults drops them', async () => {
    upstream.injectFault('listHeads', { kind: 'status', status: 502 }, 3);
    expect((await call('GET', target())).status).toBe(200);
    expect((await call('GET', path('listHeads'))).status).toBe(502);
    upstream.clearFaults();
    expect((await call('GET', path('listHeads'))).status).toBe(200);
  });
});

describe('admin endpoints and a separate-process setup', () => {
  it('stats, reset and faults over HTTP, counting with recording off', async () => {
    // Keep-alive longer than any test: close() may not wait for the socket to go idle.
    const bench = await startReferenceUpstream({ record: false, keepAliveTimeoutMs: 600_000 });
    const admin = bench.url.replace(/\/v2$/, '/__reference');
    try {
      await call('GET', path('listHeads'), {}, bench.url);
      await call('GET', path('listHeadsExt'), {}, bench.url);
      await call('GET', path('listHeadsExt'), {}, bench.url);
      expect(bench.requests).toHaveLength(0);
      const stats = await call('GET', '/stats', {}, admin);
      expect(stats.body).toMatchObject({ counts: { listHeads: 1, listHeadsExt: 2, login: 0 }, total: 3 });

      const queued = await call(
        'POST',
        '/faults',
        { json: { operation: 'listHeads', fault: { kind: 'status', status: 504 }, times: 2 } },
        admin,
      );
      expect(queued.status).toBe(204);
      expect(
        (await call('POST', '/faults', { json: { operation: 'nope', fault: { kind: 'drop' } } }, admin)).status,
      ).toBe(400);
      expect((await call('GET', path('listHeads'), {}, bench.url)).status).toBe(504);
      expect((await call('GET', path('listHeads'), {}, bench.url)).status).toBe(504);
      expect((await call('GET', path('listHeads'), {}, bench.url)).status).toBe(200);

      expect((await call('POST', '/reset', {}, admin)).status).toBe(204);
      expect((await call('GET', '/stats', {}, admin)).body).toMatchObject({ total: 0 });
      // close() waits neither for the keep-alive socket the agent holds nor for a held answer:
      // without closing them itself it would wait ten minutes, far past the test's timeout.
      bench.injectFault('listHeads', { kind: 'latency', ms: 600_000 });
      const held = call('GET', path('listHeads'), {}, bench.url);
      await until(() => bench.inFlight() === 1);
      await bench.close();
      await expect(held).rejects.toThrow(/other side closed|socket/i);
    } finally {
      await bench.close();
    }
  });

  it('each server mutates its own copy of the seed', async () => {
    const [one, other] = await Promise.all([
      startReferenceUpstream({ record: false }),
      startReferenceUpstream({ record: false }),
    ]);
    try {
      const id = one.store.headIds()[0]!;
      expect(one.store.deleteHead(id)).toBe(true);
      expect(one.store.headCount).toBe(HEAD_COUNT - 1);
      expect(other.store.headCount).toBe(HEAD_COUNT);
      expect(other.store.findHead(id)).toBeDefined();
      expect(referenceSeed().heads).toHaveLength(HEAD_COUNT);
    } finally {
      await Promise.all([one.close(), other.close()]);
    }
  });
});
