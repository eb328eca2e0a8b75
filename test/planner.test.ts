import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HeadShape } from '../src/reference-upstream/store.js';
import { startTestGateway, type TestGateway, upstreamHead } from './support/gateway.js';
import { planOf } from './support/plan.js';
import { until } from './support/until.js';

/*
 * The field-aware planner (issue "Performance"): each query shape costs the calls the planner table
 * (docs/architecture.md) gives, which is the lower bound the contract allows.
 */

let t: TestGateway;
let ids: string[];
let withHair: string;

const headA = (id: string) => upstreamHead(t, id);
const headB = (id: string) => upstreamHead(t, id, HeadShape.B_EXT);
const operations = () => t.calls().map((r) => r.operation);

beforeAll(async () => {
  t = await startTestGateway();
  ids = t.reference.store.headIds();
  withHair = ids.find((id) => headA(id).hair)!;
});

afterAll(() => t.close());
beforeEach(() => t.reset());

async function data(query: string, variables?: Record<string, unknown>): Promise<any> {
  const response = await t.execute<any>(query, variables);
  expect(response.errors).toBeUndefined();
  return response.data;
}

describe('head(id)', () => {
  it('Q1: fields variant B has cost one Get Head By Id', async () => {
    const result = await data(`query($id: ID!) { head(id: $id) { name url createdAt hair { name url } } }`, {
      id: withHair,
    });
    expect(result.head).toMatchObject({ name: headA(withHair).name, hair: { name: headA(withHair).hair.name } });
    expect(operations()).toEqual(['getHeadById']);
  });

  it('headMetadata with variant B fields costs one Get Head Ext By Id (variant B)', async () => {
    const result = await data(`query($id: ID!) { head(id: $id) { name headMetadata hair { hairMetadata userId } } }`, {
      id: withHair,
    });
    expect(result.head.headMetadata).toEqual(headA(withHair).head_metadata);
    expect(result.head.hair.hairMetadata).toEqual(headB(withHair).hair.hair_metadata);
    expect(operations()).toEqual(['getHeadExtById']);
  });

  it('variant A fields cost one extended variant A read, head_metadata included', async () => {
    const result = await data(
      `query($id: ID!) { head(id: $id) { updatedAt arUrl headMetadata hair { gender payableData { price } } } }`,
      { id: withHair },
    );
    expect(result.head.updatedAt).toBe(new Date(headA(withHair).updated_at).toISOString());
    expect(operations()).toEqual(['getHeadExt']);
  });

  it('Q4: fields of both variants cost both reads, in flight together, never more', async () => {
    t.reference.injectFault('getHeadExt', { kind: 'latency', ms: 600_000 });
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 600_000 });
    const answer = data(`query($id: ID!) { head(id: $id) { headMetadata hair { hairMetadata userId gender } } }`, {
      id: withHair,
    });
    await until(() => t.reference.inFlight() === 2, 'both reads held at the upstream');
    expect(t.reference.releaseHeld()).toBe(2);
    const result = await answer;
    expect(result.head).toEqual({
      headMetadata: headA(withHair).head_metadata,
      hair: {
        hairMetadata: headB(withHair).hair.hair_metadata,
        userId: headB(withHair).hair.user_id ?? null,
        gender: headA(withHair).hair.gender.toUpperCase(),
      },
    });
    expect(operations().sort()).toEqual(['getHeadById', 'getHeadExt']);
    expect(t.reference.maxInFlight()).toBe(2);
  });

  it('aliases of one head merge their needs: one read answers both', async () => {
    const result = await data(
      `query($id: ID!) { a: head(id: $id) { uuid name } b: head(id: $id) { name updatedAt } }`,
      { id: withHair },
    );
    expect(result.a).toEqual({ uuid: withHair, name: headA(withHair).name });
    expect(result.b.updatedAt).toBe(new Date(headA(withHair).updated_at).toISOString());
    expect(operations()).toEqual(['getHeadExt']);
  });

  it('node and nodes plan the same way', async () => {
    const { encodeGlobalID } = await import('@pothos/plugin-relay');
    await data(`query($a: ID!, $ids: [ID!]!) { node(id: $a) { ... on Head { name } } nodes(ids: $ids) { id } }`, {
      a: encodeGlobalID('Head', ids[0]!),
      ids: [encodeGlobalID('Head', ids[1]!), encodeGlobalID('Head', ids[2]!)],
    });
    expect(operations()).toEqual(['getHeadById', 'getHeadById', 'getHeadById']);
  });
});

describe('heads', () => {
  it('Q2: fields the listing has cost one Get Heads', async () => {
    const result = await data(`{ heads(first: 50) { nodes { name hair { name } } } }`);
    expect(result.heads.nodes).toHaveLength(50);
    expect(operations()).toEqual(['listHeads']);
  });

  it('Q3: headMetadata costs one Get Heads Ext call, with one extra row for hasNextPage', async () => {
    const result = await data(`{ heads(first: 20) { nodes { uuid headMetadata } pageInfo { hasNextPage } } }`);
    expect(result.heads.nodes.map((n: any) => n.uuid)).toEqual(ids.slice(0, 20));
    expect(result.heads.nodes.map((n: any) => n.headMetadata)).toEqual(
      ids.slice(0, 20).map((id) => headA(id).head_metadata),
    );
    expect(result.heads.pageInfo.hasNextPage).toBe(true);
    expect(t.calls().map((r) => [r.operation, r.query])).toEqual([['listHeadsExt', { limit: '21', skip: '0' }]]);
  });

  it('Q3 paging: the next window skips by the cursor offset, and the end says so', async () => {
    const first = await data(`{ heads(first: 100) { pageInfo { endCursor } } }`);
    t.reset();
    const tailWindow = await data(
      `query($after: String) { heads(first: 100, after: $after) { nodes { uuid hair { hairMetadata } } } }`,
      { after: first.heads.pageInfo.endCursor },
    );
    expect(tailWindow.heads.nodes.map((n: any) => n.uuid)).toEqual(ids.slice(100, 200));
    expect(t.calls().map((r) => [r.operation, r.query])).toEqual([['listHeadsExt', { limit: '101', skip: '100' }]]);
    t.reset();
    const last = await data(
      `{ heads(last: 5) { nodes { uuid headMetadata } pageInfo { hasNextPage hasPreviousPage } } }`,
    );
    expect(last.heads.nodes.map((n: any) => n.uuid)).toEqual(ids.slice(-5));
    expect(last.heads.pageInfo).toEqual({ hasNextPage: false, hasPreviousPage: true });
    // `last` needs the total first: one Get Heads of size 1, then the window.
    expect(operations()).toEqual(['listHeads', 'listHeadsExt']);
  });

  it('totalCount is read only when selected: then one Get Heads of size 1', async () => {
    const result = await data(`{ heads(first: 10) { totalCount nodes { headMetadata } } }`);
    expect(result.heads.totalCount).toBe(ids.length);
    expect(
      t
        .calls()
        .map((r) => [r.operation, r.query])
        .sort(),
    ).toEqual([
      ['listHeads', { page: '1', size: '1' }],
      ['listHeadsExt', { limit: '11', skip: '0' }],
    ]);
  });

  it('variant A fields and head_metadata: both listings at once, joined by id', async () => {
    const result = await data(
      `{ heads(first: 10) { nodes { uuid updatedAt headMetadata hair { gender hairMetadata } } } }`,
    );
    expect(result.heads.nodes.map((n: any) => n.headMetadata)).toEqual(
      ids.slice(0, 10).map((id) => headA(id).head_metadata),
    );
    expect(result.heads.nodes.map((n: any) => n.updatedAt)).toEqual(
      ids.slice(0, 10).map((id) => new Date(headA(id).updated_at).toISOString()),
    );
    expect(operations().sort()).toEqual(['listHeads', 'listHeadsExt']);
  });

  it('a style filter (Get Heads Ext has none) falls back to Get Heads and one read per head', async () => {
    const style = headA(ids[0]!).style.label as string;
    const result = await data(`query($style: String) { heads(first: 3, style: $style) { nodes { headMetadata } } }`, {
      style,
    });
    expect(result.heads.nodes).toHaveLength(3);
    expect(operations().filter((o) => o === 'listHeads')).toHaveLength(1);
    expect(operations().filter((o) => o !== 'listHeads')).toHaveLength(3);
  });

  it('a head named by id beside a listing costs its own read: root fields run together, before the page is known', async () => {
    const query = `query($id: ID!) { heads(first: 5) { nodes { uuid } } head(id: $id) { name } }`;
    const result = await data(query, { id: ids[2] });
    expect(result.head.name).toBe(headA(ids[2]!).name);
    expect(operations().sort()).toEqual(['getHeadById', 'listHeads']);
    expect(planOf(query, { id: ids[2] })).toMatchObject({ calls: 2, exact: true });
  });

  it("what a read carried answers later fields with zero calls: an update's answer its payload's variant A fields", async () => {
    const sequence = await t.execute<any>(
      `mutation($id: ID!) { updateHead(input: { id: $id, name: "Primed" }) { head { name updatedAt hair { gender } } } }`,
      { id: ids[3] },
    );
    expect(sequence.data.updateHead.head.name).toBe('Primed');
    expect(operations()).toEqual(['updateHead']);
  });

  it('a listed head answers its own fields from the listing, every field the page carried', async () => {
    const result = await data(
      `{ heads(first: 10) { nodes { uuid name updatedAt arUrl hair { name gender sourceType objMetadata } } } }`,
    );
    expect(result.heads.nodes.map((n: any) => n.updatedAt)).toEqual(
      ids.slice(0, 10).map((id) => new Date(headA(id).updated_at).toISOString()),
    );
    expect(operations()).toEqual(['listHeads']);
  });
});

describe('limits that agree', () => {
  it('nodes takes its documented 100 ids within the default budget, one read per distinct head', async () => {
    const hundred = ids.slice(0, 100);
    const result = await data(`query($ids: [ID!]!) { nodes(ids: $ids) { ... on Head { uuid } } }`, { ids: hundred });
    expect(result.nodes.map((n: any) => n.uuid)).toEqual(hundred);
    expect(operations()).toHaveLength(100);
  });

  it('a malformed id in nodes is BAD_USER_INPUT at its index; the other ids and root fields keep their data', async () => {
    const response = await t.execute<any>(
      `query($ids: [ID!]!, $id: ID!) { nodes(ids: $ids) { ... on Head { uuid } } head(id: $id) { name } }`,
      {
        ids: [ids[0], 'not-an-id', ids[1]],
        id: ids[2],
      },
    );
    expect(response.data).toEqual({
      nodes: [{ uuid: ids[0] }, null, { uuid: ids[1] }],
      head: { name: headA(ids[2]!).name },
    });
    expect(response.errors).toEqual([
      expect.objectContaining({ path: ['nodes', 1], extensions: expect.objectContaining({ code: 'BAD_USER_INPUT' }) }),
    ]);
    expect(operations()).toHaveLength(3);
  });

  it('node takes the raw UUID that head takes', async () => {
    const result = await data(`query($id: ID!) { node(id: $id) { id ... on Head { uuid } } }`, { id: ids[4] });
    expect(result.node.uuid).toBe(ids[4]);
    expect(operations()).toEqual(['getHeadById']);
  });

  it('first and last together are BAD_USER_INPUT, with no call', async () => {
    const response = await t.execute(`{ heads(first: 2, last: 2) { nodes { name } } }`);
    expect(response.errors?.map((e) => [e.extensions?.code, e.extensions?.fieldErrors])).toEqual([
      ['BAD_USER_INPUT', [{ path: ['last'], message: 'Give `first` or `last`, not both', type: 'first_and_last' }]],
    ]);
    expect(operations()).toEqual([]);
  });
});

describe('PLANNER=off: every need through its one read', () => {
  let off: TestGateway;
  beforeAll(async () => {
    off = await startTestGateway({ env: { PLANNER: 'off' } });
  });
  afterAll(() => off.close());
  beforeEach(() => off.reset());
  const offOperations = () =>
    off
      .calls()
      .map((r) => r.operation)
      .sort();

  it('head(id): the extended variant A read, and the extended variant B read for Hair B fields', async () => {
    const response = await off.execute<any>(
      `query($id: ID!) { head(id: $id) { name headMetadata hair { gender hairMetadata } } }`,
      { id: withHair },
    );
    expect(response.data.head.hair.hairMetadata).toEqual(headB(withHair).hair.hair_metadata);
    expect(offOperations()).toEqual(['getHeadExt', 'getHeadExtById']);
  });

  it('heads: Get Heads, then one extended read per head for headMetadata', async () => {
    const response = await off.execute<any>(`{ heads(first: 4) { nodes { headMetadata } } }`);
    expect(response.data.heads.nodes.map((n: any) => n.headMetadata)).toEqual(
      ids.slice(0, 4).map((id) => headA(id).head_metadata),
    );
    expect(offOperations()).toEqual(['getHeadExt', 'getHeadExt', 'getHeadExt', 'getHeadExt', 'listHeads']);
  });

  it('heads: Hair B fields through the extended variant B read of each listed head that has a hair', async () => {
    const response = await off.execute<any>(`{ heads(first: 10) { nodes { uuid hair { userId } } } }`);
    const hairy = ids.slice(0, 10).filter((id) => headA(id).hair);
    expect(response.data.heads.nodes.filter((n: any) => n.hair)).toHaveLength(hairy.length);
    expect(
      off
        .calls('getHeadExtById')
        .map((r) => r.path)
        .sort(),
    ).toEqual(hairy.map((id) => `/v2/head/${id}/ext`).sort());
    expect(off.calls()).toHaveLength(1 + hairy.length);
  });

  it('updateHead: the update, then the extended variant A read for headMetadata', async () => {
    const response = await off.execute<any>(
      `mutation($id: ID!) { updateHead(input: { id: $id, name: "Off" }) { head { name headMetadata } } }`,
      { id: ids[20] },
    );
    expect(response.data.updateHead.head.name).toBe('Off');
    expect(off.calls().map((r) => r.operation)).toEqual(['updateHead', 'getHeadExt']);
  });
});
