import { encodeGlobalID } from '@pothos/plugin-relay';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  ALICE_PASSWORD,
  ALICE_USERNAME,
  DEMO_CREDENTIALS,
  VIEWER_PASSWORD,
  VIEWER_USERNAME,
} from '../src/reference-upstream/seed.js';
import { HeadShape } from '../src/reference-upstream/store.js';
import {
  type GraphQLResponse,
  upstreamHead as projectedHead,
  startTestGateway,
  type TestGateway,
} from './support/gateway.js';
import { until } from './support/until.js';

let t: TestGateway;
let token: string;
let ids: string[];

/** The head as the upstream's variant A extended read shows it: the expected values. */
const upstreamHead = (id: string) => projectedHead(t, id);
const upstreamHeadB = (id: string) => projectedHead(t, id, HeadShape.B_EXT);
const globalId = (id: string) => encodeGlobalID('Head', id);
const bearer = (value = token) => ({ authorization: `Bearer ${value}` });
const errorCodes = (response: GraphQLResponse) => (response.errors ?? []).map((e) => e.extensions?.code);
const unknownId = '00000000-0000-4000-8000-000000000000';

async function loginAs(username: string, password: string, on: TestGateway = t): Promise<string> {
  const response = await on.execute<{ login: { accessToken: string } }>(
    'mutation($input: LoginInput!) { login(input: $input) { accessToken tokenType } }',
    {
      input: { username, password },
    },
  );
  return response.data!.login.accessToken;
}

/**
 * Runs `test` on a gateway and reference upstream of its own (the default configuration),
 * with a token its upstream issued. For tests that make the upstream fail on purpose: the shared
 * gateway's circuit breaker and retry budget are the process's, so their failures would carry over
 * (the breaker opened for the tests after them, or opened by failures of the tests before them).
 */
async function onOwnGateway(test: (own: TestGateway, ownToken: string) => Promise<void>): Promise<void> {
  const own = await startTestGateway();
  try {
    const ownToken = await loginAs(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password, own);
    own.reset();
    await test(own, ownToken);
  } finally {
    await own.close();
  }
}

// The default configuration (the planner on): the planner table (docs/architecture.md) is held in detail by
// test/planner.test.ts, with its PLANNER=off block.
beforeAll(async () => {
  t = await startTestGateway();
  token = await loginAs(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password);
  ids = t.reference.store.headIds();
});

afterAll(() => t.close());

beforeEach(() => t.reset());

const fullHead = `
  id uuid name url arUrl outputFormat style version lod headMetadata createdAt updatedAt
  hair { id name url thumbnailUrl style sourceType gender objMetadata hairMetadata userId createdAt updatedAt payableData { price description } }`;

describe('Head and Hair fields', () => {
  it('resolves every field of head(id) from the upstream reads, variant A and B merged', async () => {
    const id = ids.find((i) => upstreamHead(i).hair?.payable_data && upstreamHead(i).ar_url)!;
    expect(id).toBeDefined();
    const response = await t.execute<{ head: any }>(`query($id: ID!) { head(id: $id) { ${fullHead} } }`, {
      id: globalId(id),
    });
    expect(response.errors).toBeUndefined();
    const a = upstreamHead(id);
    const b = upstreamHeadB(id);
    expect(response.data!.head).toEqual({
      id: globalId(id),
      uuid: id,
      name: a.name,
      url: a.url,
      arUrl: a.ar_url,
      outputFormat: a.output_format,
      style: a.style,
      version: a.version,
      lod: a.lod ?? null,
      headMetadata: a.head_metadata,
      createdAt: new Date(a.created_at).toISOString(),
      updatedAt: new Date(a.updated_at).toISOString(),
      hair: {
        id: a.hair.id,
        name: a.hair.name,
        url: a.hair.url,
        thumbnailUrl: a.hair.thumbnail_url ?? null,
        style: a.hair.style.toUpperCase(),
        sourceType: a.hair.source_type.toUpperCase(),
        gender: a.hair.gender.toUpperCase(),
        objMetadata: a.hair.obj_metadata,
        hairMetadata: b.hair.hair_metadata,
        userId: b.hair.user_id ?? null,
        createdAt: new Date(a.hair.created_at).toISOString(),
        updatedAt: a.hair.updated_at ?? null,
        payableData: { price: a.hair.payable_data.price, description: a.hair.payable_data.description ?? null },
      },
    });
    // Head fields, head_metadata and Hair A from the extended variant A read, Hair B from Get Head By Id.
    expect(
      t
        .calls()
        .map((r) => r.operation)
        .sort(),
    ).toEqual(['getHeadById', 'getHeadExt']);
  });

  it('accepts the raw UUID as well as the global ID', async () => {
    const response = await t.execute<{ head: { id: string; name: string } }>(
      `query($id: ID!) { head(id: $id) { id name } }`,
      { id: ids[7] },
    );
    expect(response.data!.head).toEqual({ id: globalId(ids[7]!), name: upstreamHead(ids[7]!).name });
    expect(t.calls()).toHaveLength(1);
  });

  it('resolves a head without hair to hair: null', async () => {
    const id = ids.find((i) => !upstreamHead(i).hair)!;
    const response = await t.execute<{ head: { hair: null } }>(
      `query($id: ID!) { head(id: $id) { hair { name hairMetadata } } }`,
      { id },
    );
    expect(response.data!.head.hair).toBeNull();
    expect(t.calls()).toHaveLength(1);
  });

  it('answers node and nodes by global ID, null for an ID that matches nothing', async () => {
    const response = await t.execute<{ node: any; nodes: any[] }>(
      `query($a: ID!, $ids: [ID!]!) { node(id: $a) { id ... on Head { name } } nodes(ids: $ids) { id ... on Head { uuid } } }`,
      { a: globalId(ids[0]!), ids: [globalId(ids[1]!), globalId(ids[0]!), encodeGlobalID('Permission', ids[2]!)] },
    );
    expect(response.data!.node).toEqual({ id: globalId(ids[0]!), name: upstreamHead(ids[0]!).name });
    expect(response.data!.nodes).toEqual([
      { id: globalId(ids[1]!), uuid: ids[1] },
      { id: globalId(ids[0]!), uuid: ids[0] },
      null,
    ]);
    // Two distinct heads, each read once for node and nodes together.
    expect(
      t
        .calls()
        .map((r) => r.path)
        .sort(),
    ).toEqual([ids[0], ids[1]].map((id) => `/v2/head/${id}`).sort());
  });
});

describe('upstream calls: dedupe and completion', () => {
  it('aliases and repeated fields for the same head cost one call', async () => {
    const id = ids[4]!;
    const response = await t.execute(
      `query($id: ID!, $raw: ID!) { a: head(id: $id) { name } b: head(id: $raw) { headMetadata updatedAt } c: node(id: $id) { id } d: head(id: $id) { hair { gender objMetadata } } }`,
      { id: globalId(id), raw: id },
    );
    expect(response.errors).toBeUndefined();
    expect(t.calls()).toHaveLength(1);
  });

  it('a listed head whose selected fields the listing answered costs nothing more', async () => {
    const response = await t.execute<any>(
      `{ heads(first: 20) { totalCount nodes { id uuid name url arUrl createdAt updatedAt outputFormat hair { id name style sourceType gender payableData { price } } } } }`,
    );
    expect(response.errors).toBeUndefined();
    expect(response.data.heads.nodes).toHaveLength(20);
    expect(t.calls().map((r) => r.operation)).toEqual(['listHeads']);
  });

  it('headMetadata on listed heads comes with the Get Heads Ext listing: one call', async () => {
    const response = await t.execute<any>(`{ heads(first: 5) { nodes { uuid headMetadata } } }`);
    expect(response.data.heads.nodes.map((n: any) => n.headMetadata)).toEqual(
      ids.slice(0, 5).map((id) => upstreamHead(id).head_metadata),
    );
    expect(t.calls().map((r) => [r.operation, r.query])).toEqual([['listHeadsExt', { limit: '6', skip: '0' }]]);
  });

  it('Hair B fields on listed heads come with the Get Heads Ext listing: one call', async () => {
    const response = await t.execute<any>(`{ heads(first: 10) { nodes { uuid hair { hairMetadata userId } } } }`);
    const withHair = ids.slice(0, 10).filter((id) => upstreamHead(id).hair);
    expect(response.data.heads.nodes.filter((n: any) => n.hair).map((n: any) => n.hair.hairMetadata)).toEqual(
      withHair.map((id) => upstreamHeadB(id).hair.hair_metadata),
    );
    expect(t.calls().map((r) => r.operation)).toEqual(['listHeadsExt']);
  });

  it('the same list page in one operation is fetched once', async () => {
    await t.execute(
      `{ a: heads(first: 10) { nodes { id } } b: heads(first: 10) { totalCount } c: heads(first: 5) { nodes { name } } }`,
    );
    expect(t.calls('listHeads').map((r) => r.query)).toEqual([
      { page: '1', size: '10' },
      { page: '1', size: '5' },
    ]);
  });
});

describe('heads connection paging', () => {
  type Page = {
    totalCount: number;
    edges: { cursor: string; node: { uuid: string } }[];
    pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  };
  const page = async (args: string) => {
    const response = await t.execute<{ heads: Page }>(
      `{ heads${args ? `(${args})` : ''} { totalCount edges { cursor node { uuid } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`,
    );
    expect(response.errors).toBeUndefined();
    return response.data!.heads;
  };
  const uuids = (p: Page) => p.edges.map((e) => e.node.uuid);

  it('defaults to 50 heads from the start', async () => {
    const first = await page('');
    expect(uuids(first)).toEqual(ids.slice(0, 50));
    expect(first.totalCount).toBe(ids.length);
    expect(first.pageInfo).toMatchObject({ hasPreviousPage: false, hasNextPage: true });
    expect(t.calls('listHeads').map((r) => r.query)).toEqual([{ page: '1', size: '50' }]);
  });

  it('pages forwards with after, through to the last window', async () => {
    const first = await page('first: 10');
    expect(uuids(first)).toEqual(ids.slice(0, 10));
    const second = await page(`first: 10, after: "${first.pageInfo.endCursor}"`);
    expect(uuids(second)).toEqual(ids.slice(10, 20));
    expect(second.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: true });

    const nearEnd = await page(`first: 1, after: "${second.edges[0]!.cursor}"`);
    expect(uuids(nearEnd)).toEqual([ids[11]]);
    const lastCursor = (await page(`first: 100, after: "${second.pageInfo.endCursor}"`)).edges.at(-1)!.cursor;

    const tail = await page(`first: 100, after: "${lastCursor}"`);
    expect(uuids(tail)).toEqual(ids.slice(120, 220));
    const end = await page(`first: 100, after: "${tail.pageInfo.endCursor}"`);
    expect(uuids(end)).toEqual(ids.slice(220));
    expect(end.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const beyond = await page(`first: 5, after: "${end.pageInfo.endCursor}"`);
    expect(beyond.edges).toEqual([]);
    expect(beyond.pageInfo).toMatchObject({ hasNextPage: false, startCursor: null, endCursor: null });
    expect(beyond.totalCount).toBe(ids.length);
  });

  it('pages backwards with last and before', async () => {
    const last = await page('last: 5');
    expect(uuids(last)).toEqual(ids.slice(-5));
    expect(last.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    // `last` without `before` needs the total first: a probe window, then the tail window.
    expect(t.calls('listHeads')).toHaveLength(2);

    t.reset();
    const before = await page(`last: 10, before: "${last.pageInfo.startCursor}"`);
    expect(uuids(before)).toEqual(ids.slice(-15, -5));
    expect(before.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: true });
    expect(t.calls('listHeads')).toHaveLength(1);

    const start = await page(`last: 10, before: "${(await page('first: 3')).edges[2]!.cursor}"`);
    expect(uuids(start)).toEqual(ids.slice(0, 2));
    expect(start.pageInfo.hasPreviousPage).toBe(false);
  });

  it('answers last over a listing shorter than the window from the probe alone', async () => {
    const word = upstreamHead(ids[0]!).name.split(' ').at(-1)!;
    const matching = ids.filter((id) => upstreamHead(id).name.toLowerCase().includes(word.toLowerCase()));
    expect(matching.length).toBeLessThan(100);
    const response = await t.execute<{ heads: Page }>(
      `query($s: String) { heads(last: 100, search: $s) { totalCount edges { node { uuid } } } }`,
      { s: word },
    );
    expect(response.data!.heads.edges.map((e) => e.node.uuid)).toEqual(matching);
    expect(response.data!.heads.totalCount).toBe(matching.length);
    expect(t.calls('listHeads')).toHaveLength(1);
  });

  it('passes search and style to Get Heads', async () => {
    const style = upstreamHead(ids[0]!).style.label as string;
    const response = await t.execute<any>(
      `query($style: String) { heads(first: 100, style: $style) { totalCount nodes { style } } }`,
      { style },
    );
    expect(response.data.heads.nodes.length).toBeGreaterThan(0);
    expect(response.data.heads.nodes.every((n: any) => n.style.label === style)).toBe(true);
    expect(t.calls('listHeads')[0]!.query).toMatchObject({ style });
  });
});

describe('permissions connection', () => {
  it('pages permissions with the caller token', async () => {
    const response = await t.execute<any>(
      `{ permissions(first: 3) { totalCount nodes { id role } pageInfo { hasNextPage endCursor } } }`,
      undefined,
      bearer(),
    );
    const expected = t.reference.store
      .permissions()
      .slice(0, 3)
      .map((p) => ({ id: p.id, role: p.role.toUpperCase() }));
    expect(response.data.permissions.nodes).toEqual(expected);
    expect(response.data.permissions.totalCount).toBe(t.reference.store.permissions().length);
    const next = await t.execute<any>(
      `query($after: String) { permissions(first: 2, after: $after) { nodes { id } } }`,
      { after: response.data.permissions.pageInfo.endCursor },
      bearer(),
    );
    expect(next.data.permissions.nodes.map((n: any) => n.id)).toEqual(
      t.reference.store
        .permissions()
        .slice(3, 5)
        .map((p) => p.id),
    );
    const last = await t.execute<any>(
      `{ permissions(last: 2) { nodes { id } pageInfo { hasNextPage } } }`,
      undefined,
      bearer(),
    );
    expect(last.data.permissions.nodes.map((n: any) => n.id)).toEqual(
      t.reference.store
        .permissions()
        .slice(-2)
        .map((p) => p.id),
    );
    expect(t.calls('getPermissions').every((r) => r.headers.authorization === `Bearer ${token}`)).toBe(true);
  });
});

describe('mutations', () => {
  it('updateHead sends only the fields given, once, and answers from the update itself', async () => {
    const id = ids[30]!;
    const before = upstreamHead(id);
    const response = await t.execute<any>(
      `mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id name updatedAt style } } }`,
      {
        input: { id: globalId(id), name: 'Renamed Head', style: { label: 'cartoon' } },
      },
    );
    expect(response.errors).toBeUndefined();
    expect(response.data.updateHead.head).toMatchObject({
      id: globalId(id),
      name: 'Renamed Head',
      style: { label: 'cartoon' },
    });
    expect(response.data.updateHead.head.updatedAt).not.toBe(new Date(before.updated_at).toISOString());
    expect(t.calls()).toHaveLength(1);
    expect(t.calls('updateHead')[0]!.body).toEqual({ name: 'Renamed Head', style: { label: 'cartoon' } });
    expect(upstreamHead(id).name).toBe('Renamed Head');
  });

  it('updateHead attaches a hair by id and reads the new metadata with one more call', async () => {
    const id = ids[31]!;
    const hairId = upstreamHead(ids[32]!).hair?.id ?? upstreamHead(ids.find((i) => upstreamHead(i).hair)!).hair.id;
    const response = await t.execute<any>(
      `mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { hair { id } headMetadata } } }`,
      {
        input: { id, hairId, hairColor: 'auburn' },
      },
    );
    expect(response.errors).toBeUndefined();
    expect(response.data.updateHead.head.hair.id).toBe(hairId);
    // The update answers variant A without head_metadata: the extended variant B read has it.
    expect(t.calls().map((r) => r.operation)).toEqual(['updateHead', 'getHeadExtById']);
    expect(t.calls('updateHead')[0]!.body).toEqual({ hair_id: hairId, hair_color: 'auburn' });
  });

  it('deleteHead deletes with the bearer token, and the head is gone', async () => {
    // On an upstream of its own: the other tests list every head, in whatever order they run.
    const own = await startTestGateway({ env: { PLANNER: 'off' } });
    try {
      const ownToken = await loginAs(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password, own);
      own.reset();
      const id = ids[40]!;
      const response = await own.execute<any>(
        `mutation($input: DeleteHeadInput!) { deleteHead(input: $input) { deletedHeadId deletedHeadUuid } }`,
        { input: { id: globalId(id) } },
        bearer(ownToken),
      );
      expect(response.data.deleteHead).toEqual({ deletedHeadId: globalId(id), deletedHeadUuid: id });
      expect(own.calls('deleteHead')).toHaveLength(1);
      expect(own.calls('deleteHead')[0]!.headers.authorization).toBe(`Bearer ${ownToken}`);
      const gone = await own.execute<any>(`query($id: ID!) { head(id: $id) { name } }`, { id });
      expect(gone.data.head).toBeNull();
      expect(errorCodes(gone)).toEqual(['NOT_FOUND']);
    } finally {
      await own.close();
    }
  });

  it('updateSubscription maps enums both ways and sends only the fields given', async () => {
    const response = await t.execute<any>(
      `mutation($input: UpdateSubscriptionInput!) { updateSubscription(input: $input) { subscription { id organizationId platformType active expireAt createdAt updatedAt subscriptionType { id name tag description statementDescriptor avatarLimit userLimit price paymentCycle type } } } }`,
      { input: { platformType: 'PRIVATE', active: true } },
      bearer(),
    );
    expect(response.errors).toBeUndefined();
    const subscription = response.data.updateSubscription.subscription;
    expect(subscription).toMatchObject({ platformType: 'PRIVATE', active: true });
    expect(t.calls('updateSubscription')[0]!.body).toEqual({ platform_type: 'private', active: true });
    const stored = t.reference.store.subscriptionDto(
      t.reference.store.subscriptionForOrganization(subscription.organizationId)!,
    ) as any;
    const cycles: Record<number, string> = {
      1: 'MONTHLY',
      2: 'BIMONTHLY',
      3: 'QUARTERLY',
      6: 'SEMIANNUAL',
      12: 'ANNUAL',
    };
    expect(subscription.subscriptionType).toEqual({
      id: stored.subscription_type.id,
      name: stored.subscription_type.name,
      tag: stored.subscription_type.tag,
      description: stored.subscription_type.description,
      statementDescriptor: stored.subscription_type.statement_descriptor ?? null,
      avatarLimit: stored.subscription_type.avatar_limit ?? null,
      userLimit: stored.subscription_type.user_limit ?? null,
      price: stored.subscription_type.price,
      paymentCycle: cycles[stored.subscription_type.payment_cycle],
      type: stored.subscription_type.type ?? null,
    });
  });

  it('login proxies the password flow and its token works on the next request', async () => {
    const response = await t.execute<any>(
      'mutation($input: LoginInput!) { login(input: $input) { accessToken tokenType } }',
      {
        input: { username: ALICE_USERNAME, password: ALICE_PASSWORD },
      },
    );
    expect(response.data.login.tokenType.toLowerCase()).toBe('bearer');
    expect(t.calls('login')[0]!.body).toEqual({
      username: ALICE_USERNAME,
      password: ALICE_PASSWORD,
      grant_type: 'password',
    });
    // The token handed over is the one the upstream issued to alice.
    expect(t.reference.store.userForToken(response.data.login.accessToken)?.username).toBe(ALICE_USERNAME);
    const permissions = await t.execute<any>(
      '{ permissions(first: 1) { totalCount } }',
      undefined,
      bearer(response.data.login.accessToken),
    );
    expect(permissions.data.permissions.totalCount).toBeGreaterThan(0);
    const refused = await t.execute<any>(
      'mutation { login(input: { username: "alice", password: "nope" }) { accessToken } }',
    );
    expect(errorCodes(refused)).toEqual(['UNAUTHENTICATED']);
  });
});

describe('errors', () => {
  const fieldErrors = (response: GraphQLResponse) =>
    response.errors?.[0]?.extensions?.fieldErrors as { path: unknown[]; type: string }[];

  it.each([
    ['head id that is neither a UUID nor a global ID', `{ head(id: "not-an-id") { name } }`, ['id']],
    [
      'global ID of another type',
      `{ head(id: "${encodeGlobalID('Permission', '00000000-0000-4000-8000-000000000000')}") { name } }`,
      ['id'],
    ],
    ['first: 0', `{ heads(first: 0) { totalCount } }`, ['first']],
    ['first: 101', `{ heads(first: 101) { totalCount } }`, ['first']],
    ['last: 101', `{ heads(last: 101) { totalCount } }`, ['last']],
    ['a cursor this gateway did not issue', `{ heads(first: 5, after: "bm90LWEtY3Vyc29y") { totalCount } }`, ['after']],
    [
      'an update with nothing to change',
      `mutation { updateHead(input: { id: "${'00000000-0000-4000-8000-000000000000'}" }) { head { name } } }`,
      ['input'],
    ],
    [
      'an update of a head id that is not one',
      `mutation { updateHead(input: { id: "x", name: "n" }) { head { name } } }`,
      ['input', 'id'],
    ],
    [
      'a subscription update with nothing to change',
      `mutation { updateSubscription(input: {}) { subscription { id } } }`,
      ['input'],
    ],
  ])('refuses %s with BAD_USER_INPUT and no upstream call', async (_, query, path) => {
    const response = await t.execute(query, undefined, bearer());
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
    expect(fieldErrors(response).map((e) => e.path)).toEqual([path]);
    expect(typeof fieldErrors(response)[0]!.type).toBe('string');
    expect(t.calls()).toHaveLength(0);
  });

  it('refuses a hair id that is not a UUID with BAD_USER_INPUT and no upstream call', async () => {
    const response = await t.execute(
      `mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { name } } }`,
      { input: { id: ids[0], hairId: 'not-a-uuid' } },
    );
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
    expect(fieldErrors(response).map((e) => e.path)).toEqual([['input', 'hairId']]);
    expect(t.calls()).toHaveLength(0);
  });

  it('refuses deleteHead and permissions without Authorization, with no upstream call', async () => {
    const del = await t.execute(`mutation { deleteHead(input: { id: "${ids[0]}" }) { deletedHeadUuid } }`);
    const perms = await t.execute(`{ permissions { totalCount } }`);
    expect(errorCodes(del)).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(perms)).toEqual(['UNAUTHENTICATED']);
    expect(t.calls()).toHaveLength(0);
  });

  it('maps upstream 401, 403 and 404', async () => {
    const badToken = await t.execute(`{ permissions(first: 1) { totalCount } }`, undefined, bearer('not-a-token'));
    expect(errorCodes(badToken)).toEqual(['UNAUTHENTICATED']);
    const viewer = await loginAs(VIEWER_USERNAME, VIEWER_PASSWORD);
    t.reset();
    const forbidden = await t.execute(
      `mutation { deleteHead(input: { id: "${ids[0]}" }) { deletedHeadUuid } }`,
      undefined,
      bearer(viewer),
    );
    expect(errorCodes(forbidden)).toEqual(['FORBIDDEN']);
    const missing = await t.execute<any>(`{ head(id: "${unknownId}") { name } }`);
    expect(errorCodes(missing)).toEqual(['NOT_FOUND']);
    expect(missing.data.head).toBeNull();
    expect(t.calls().map((r) => r.operation)).toEqual(['deleteHead', 'getHeadById']);
  });

  it('maps an upstream 422 to BAD_USER_INPUT with fieldErrors on the GraphQL input path', async () => {
    const response = await t.execute(
      `mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { name } } }`,
      { input: { id: ids[0], style: 'not-an-object' } },
    );
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
    expect(fieldErrors(response)).toEqual([
      { path: ['input', 'style'], message: expect.any(String), type: 'dict_type' },
    ]);
    expect(t.calls('updateHead')).toHaveLength(1);
  });

  it('maps timeouts, unreachable and failing upstreams; GETs retried, mutations never', async () => {
    // Its failures open the breaker of the gateway they go through (and spend its retry budget): on one of its own.
    await onOwnGateway(async (own) => {
      own.reference.injectFault('getHeadById', { kind: 'drop' }, 3);
      const unavailable = await own.execute(`{ head(id: "${ids[0]}") { name } }`);
      expect(errorCodes(unavailable)).toEqual(['UPSTREAM_UNAVAILABLE']);
      expect(own.calls('getHeadById')).toHaveLength(3);

      own.reset();
      own.reference.injectFault('getHeadById', { kind: 'status', status: 503 }, 2);
      const recovered = await own.execute<any>(`{ head(id: "${ids[0]}") { name } }`);
      expect(recovered.data.head.name).toBe(projectedHead(own, ids[0]!).name);
      expect(own.calls('getHeadById')).toHaveLength(3);

      own.reset();
      own.reference.injectFault('getHeadById', { kind: 'status', status: 500 });
      expect(errorCodes(await own.execute(`{ head(id: "${ids[0]}") { name } }`))).toEqual(['UPSTREAM_ERROR']);
      own.reference.injectFault('getHeadById', { kind: 'malformed-json' });
      expect(errorCodes(await own.execute(`{ head(id: "${ids[0]}") { name } }`))).toEqual(['UPSTREAM_ERROR']);
      own.reference.injectFault('getHeadById', { kind: 'off-contract' });
      expect(errorCodes(await own.execute(`{ head(id: "${ids[0]}") { name } }`))).toEqual(['UPSTREAM_ERROR']);
      expect(own.calls('getHeadById')).toHaveLength(3);

      own.reset();
      own.reference.injectFault('updateHead', { kind: 'status', status: 503 });
      const mutation = await own.execute(
        `mutation { updateHead(input: { id: "${ids[0]}", name: "x" }) { head { name } } }`,
      );
      expect(errorCodes(mutation)).toEqual(['UPSTREAM_ERROR']);
      expect(own.calls('updateHead')).toHaveLength(1);
    });
  });

  it('maps a slow upstream to UPSTREAM_TIMEOUT', async () => {
    const slow = await startTestGateway({ env: { UPSTREAM_TIMEOUT_MS: '100' } });
    try {
      slow.reference.injectFault('getHeadById', { kind: 'latency', ms: 1_000 });
      const response = await slow.execute<any>(`{ head(id: "${ids[0]}") { name } }`);
      expect(errorCodes(response)).toEqual(['UPSTREAM_TIMEOUT']);
      expect(response.data.head).toBeNull();
      expect(slow.calls('getHeadById')).toHaveLength(1);
    } finally {
      await slow.close();
    }
  });

  it('keeps the data of the other fields when one fails', async () => {
    const response = await t.execute<any>(
      `{ ok: head(id: "${ids[0]}") { name } missing: head(id: "${unknownId}") { name } }`,
    );
    expect(response.data.ok.name).toBe(upstreamHead(ids[0]!).name);
    expect(response.data.missing).toBeNull();
    expect(response.errors).toHaveLength(1);
    expect(response.errors![0]!.path).toEqual(['missing']);
  });

  it('an upstream value outside a contract enum nulls that field, logs a warning and keeps the head', async () => {
    const id = ids.find((i) => upstreamHead(i).hair)!;
    const body = { ...upstreamHead(id), hair: { ...upstreamHead(id).hair, gender: 'other', style: 'neon' } };
    t.reference.injectFault('getHeadExt', { kind: 'off-contract', body });
    const logged = t.logLines.length;
    const response = await t.execute<any>(`{ head(id: "${id}") { name hair { name gender style } } }`, undefined, {
      'x-request-id': 'enum-drift-1',
    });
    expect(response.errors).toBeUndefined();
    expect(response.data.head.hair).toEqual({ name: body.hair.name, gender: null, style: null });
    // One warning per field, each with the request's id (its child logger, made on first use).
    const warnings = t.logLines
      .slice(logged)
      .map((line) => JSON.parse(line))
      .filter((line) => line.level === 40 && line.field !== undefined);
    expect(warnings.map((w) => [w.field, w.value, w.requestId]).sort()).toEqual([
      ['Hair.gender', 'other', 'enum-drift-1'],
      ['Hair.style', 'neon', 'enum-drift-1'],
    ]);
  });

  it('an absent or null optional hair enum reads as the contract default (style PHR, source type CUSTOM), without a warning', async () => {
    const id = ids.find((i) => upstreamHead(i).hair)!;
    const { source_type: _, ...hair } = upstreamHead(id).hair;
    t.reference.injectFault('getHeadExt', {
      kind: 'off-contract',
      body: { ...upstreamHead(id), hair: { ...hair, style: null } },
    });
    const logged = t.logLines.length;
    const response = await t.execute<any>(`{ head(id: "${id}") { hair { style sourceType } } }`);
    expect(response).toEqual({ data: { head: { hair: { style: 'PHR', sourceType: 'CUSTOM' } } } });
    expect(t.logLines.slice(logged).filter((line) => line.includes('"level":40'))).toEqual([]);
  });

  it('a timestamp without an offset is read as UTC: answered with a Z, in a head and in a listing', async () => {
    const id = ids.find((i) => upstreamHead(i).hair)!;
    const head = upstreamHead(id);
    t.reference.injectFault('getHeadExt', {
      kind: 'off-contract',
      body: {
        ...head,
        created_at: '2024-03-01T10:20:30',
        hair: { ...head.hair, created_at: '2024-03-01T10:20:30.25' },
      },
    });
    expect(await t.execute(`{ head(id: "${id}") { createdAt updatedAt hair { createdAt } } }`)).toEqual({
      data: {
        head: {
          createdAt: '2024-03-01T10:20:30.000Z',
          updatedAt: new Date(head.updated_at).toISOString(),
          hair: { createdAt: '2024-03-01T10:20:30.250Z' },
        },
      },
    });
    const page = { items: [{ ...head, updated_at: '2024-03-02T00:00:00' }], total: 1, page: 1, size: 1, pages: 1 };
    t.reference.injectFault('listHeads', { kind: 'off-contract', body: page });
    expect(await t.execute('{ heads(first: 1) { nodes { updatedAt } } }')).toEqual({
      data: { heads: { nodes: [{ updatedAt: '2024-03-02T00:00:00.000Z' }] } },
    });
  });

  it('answers every timestamp in UTC with milliseconds: one already so as it came, one with an offset or more digits converted', async () => {
    const id = ids.find((i) => upstreamHead(i).hair)!;
    const head = upstreamHead(id);
    const sent = {
      created_at: '2024-03-01T10:20:30.123Z',
      updated_at: '2024-03-01T12:20:30+02:00',
      hair: '2024-03-01T10:20:30.123456Z',
    };
    t.reference.injectFault('getHeadExt', {
      kind: 'off-contract',
      body: {
        ...head,
        created_at: sent.created_at,
        updated_at: sent.updated_at,
        hair: { ...head.hair, created_at: sent.hair },
      },
    });
    expect(await t.execute(`{ head(id: "${id}") { createdAt updatedAt hair { createdAt } } }`)).toEqual({
      data: {
        head: {
          createdAt: '2024-03-01T10:20:30.123Z',
          updatedAt: '2024-03-01T10:20:30.000Z',
          hair: { createdAt: '2024-03-01T10:20:30.123Z' },
        },
      },
    });
  });

  it('refuses an asset address that is not http(s) as off-contract, logged as a warning not an error', async () => {
    t.reference.injectFault('getHeadExt', {
      kind: 'off-contract',
      body: { ...upstreamHead(ids[0]!), url: 'javascript:alert(1)' },
    });
    const logged = t.logLines.length;
    const response = await t.execute<any>(`{ head(id: "${ids[0]}") { url updatedAt } }`);
    expect(errorCodes(response)).toEqual(['UPSTREAM_ERROR']);
    expect(JSON.stringify(response)).not.toContain('javascript:');
    // This request's line (the shared gateway's log holds every earlier test's too).
    const line = t.logLines.slice(logged).find((l) => l.includes('off-contract'));
    expect(line).toContain('"level":40');
  });

  it('no error message carries a stack trace, the upstream address or a token', async () => {
    // Its 5xx and dropped reads count towards the breaker of the gateway they go through: on one of its own.
    await onOwnGateway(async (own, ownToken) => {
      const leaky = `at ${own.reference.url}/heads Bearer ${ownToken}`;
      own.reference.injectFault('getHeadById', { kind: 'status', status: 500, body: { detail: leaky } });
      own.reference.injectFault('getHeadExtById', { kind: 'drop' }, 3);
      const withHair = ids.find((id) => projectedHead(own, id).hair)!;
      own.reference.injectFault('updateHead', {
        kind: 'status',
        status: 422,
        body: { detail: [{ loc: ['body', 'name'], msg: leaky, type: 'value_error' }] },
      });
      const responses = [
        await own.execute(`{ head(id: "${ids[0]}") { name } }`, undefined, bearer(ownToken)),
        await own.execute(
          `{ head(id: "${withHair}") { headMetadata hair { hairMetadata } } }`,
          undefined,
          bearer(ownToken),
        ),
        await own.execute(
          `mutation { updateHead(input: { id: "${ids[0]}", name: "x" }) { head { name } } }`,
          undefined,
          bearer(ownToken),
        ),
        await own.execute(`query($id: ID!) { head(id: $id) { name } }`, { id: 42 }, bearer(ownToken)),
      ];
      expect(responses.map(errorCodes)).toEqual([
        ['UPSTREAM_ERROR'],
        ['UPSTREAM_UNAVAILABLE'],
        ['BAD_USER_INPUT'],
        ['BAD_USER_INPUT'],
      ]);
      for (const response of responses) {
        const text = JSON.stringify(response);
        expect(text).not.toContain(new URL(own.reference.url).host);
        expect(text).not.toContain(ownToken);
        expect(text).not.toMatch(/\bat .*\.(?:ts|js):\d+/);
        expect(text).not.toContain('stack');
      }
    });
  });
});

describe('token forwarding', () => {
  it('two concurrent callers with different tokens: each upstream call carries only its caller token', async () => {
    const alice = await loginAs(ALICE_USERNAME, ALICE_PASSWORD);
    t.reset();
    // The upstream holds all four head reads until both operations have theirs in flight on the
    // shared connection pool at once.
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 }, 4);
    const query = `query($a: ID!, $b: ID!) { a: head(id: $a) { name } b: head(id: $b) { name } permissions(first: 2) { totalCount } }`;
    const both = Promise.all([
      t.execute<any>(query, { a: ids[0], b: ids[1] }, { ...bearer(token), 'x-request-id': 'demo-request' }),
      t.execute<any>(query, { a: ids[0], b: ids[2] }, { ...bearer(alice), 'x-request-id': 'alice-request' }),
    ]);
    await until(() => t.reference.inFlight() === 4, 'four head reads held at the upstream');
    const heldFor = t
      .calls('getHeadById')
      .filter((r) => r.status === undefined)
      .map((r) => [r.headers['x-request-id'], r.headers.authorization]);
    expect(heldFor.sort()).toEqual([
      ['alice-request', `Bearer ${alice}`],
      ['alice-request', `Bearer ${alice}`],
      ['demo-request', `Bearer ${token}`],
      ['demo-request', `Bearer ${token}`],
    ]);
    expect(t.reference.releaseHeld()).toBe(4);
    const [fromDemo, fromAlice] = await both;
    expect(fromDemo.data.a.name).toBe(upstreamHead(ids[0]!).name);
    expect(fromAlice.data.b.name).toBe(upstreamHead(ids[2]!).name);
    const byRequest = (id: string) => t.calls().filter((r) => r.headers['x-request-id'] === id);
    expect(byRequest('demo-request')).toHaveLength(3);
    expect(byRequest('alice-request')).toHaveLength(3);
    expect(byRequest('demo-request').every((r) => r.headers.authorization === `Bearer ${token}`)).toBe(true);
    expect(byRequest('alice-request').every((r) => r.headers.authorization === `Bearer ${alice}`)).toBe(true);
    // No cache crosses requests: the head both asked for was read once for each.
    expect(t.calls('getHeadById').filter((r) => r.path.endsWith(`/head/${ids[0]}`))).toHaveLength(2);
  });

  it('never logs or echoes the token', async () => {
    const secret = 'secret-token-value-123';
    const response = await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(secret) },
      body: JSON.stringify({ query: `{ permissions(first: 1) { totalCount } head(id: "bad") { name } }` }),
    });
    const text = await response.text();
    // Both failures are answered (the upstream refused the token, the id is not one) ...
    expect(errorCodes(JSON.parse(text) as GraphQLResponse).sort()).toEqual(['BAD_USER_INPUT', 'UNAUTHENTICATED']);
    expect(t.calls('getPermissions')[0]!.headers.authorization).toBe(`Bearer ${secret}`);
    // ... and neither the body, nor a response header, nor a log line carries the token.
    expect(text).not.toContain(secret);
    expect([...response.headers].flat().join('\n')).not.toContain(secret);
    expect(t.logLines.join('\n')).not.toContain(secret);
  });
});
