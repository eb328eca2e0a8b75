import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HeadShape } from '../src/reference-upstream/store.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The field-aware planner (issue "Performance"): each query shape costs the calls the README's
 * planner table gives, which is the lower bound the contract allows.
 */

let t: TestGateway;
let ids: string[];
let withHair: string;

const headA = (id: string) => t.reference.store.project(t.reference.store.findHead(id)!, HeadShape.A_EXT) as Record<string, any>;
const headB = (id: string) => t.reference.store.project(t.reference.store.findHead(id)!, HeadShape.B_EXT) as Record<string, any>;
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
    const result = await data(`query($id: ID!) { head(id: $id) { name url createdAt hair { name url } } }`, { id: withHair });
    expect(result.head).toMatchObject({ name: headA(withHair).name, hair: { name: headA(withHair).hair.name } });
    expect(operations()).toEqual(['getHeadById']);
  });

  it('headMetadata with variant B fields costs one Get Head Ext By Id (variant B)', async () => {
    const result = await data(`query($id: ID!) { head(id: $id) { name headMetadata hair { hairMetadata userId } } }`, { id: withHair });
    expect(result.head.headMetadata).toEqual(headA(withHair).head_metadata);
    expect(result.head.hair.hairMetadata).toEqual(headB(withHair).hair.hair_metadata);
    expect(operations()).toEqual(['getHeadExtById']);
  });

  it('variant A fields cost one extended variant A read, head_metadata included', async () => {
    const result = await data(`query($id: ID!) { head(id: $id) { updatedAt arUrl headMetadata hair { gender payableData { price } } } }`, { id: withHair });
    expect(result.head.updatedAt).toBe(new Date(headA(withHair).updated_at).toISOString());
    expect(operations()).toEqual(['getHeadExt']);
  });

  it('Q4: fields of both variants cost both reads, in flight together, never more', async () => {
    t.reference.injectFault('getHeadExt', { kind: 'latency', ms: 60 });
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 60 });
    const result = await data(`query($id: ID!) { head(id: $id) { headMetadata hair { hairMetadata userId gender } } }`, { id: withHair });
    expect(result.head).toEqual({
      headMetadata: headA(withHair).head_metadata,
      hair: { hairMetadata: headB(withHair).hair.hair_metadata, userId: headB(withHair).hair.user_id ?? null, gender: headA(withHair).hair.gender.toUpperCase() },
    });
    expect(operations().sort()).toEqual(['getHeadById', 'getHeadExt']);
    expect(t.reference.maxInFlight()).toBe(2);
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
    expect(result.heads.nodes.map((n: any) => n.headMetadata)).toEqual(ids.slice(0, 20).map((id) => headA(id).head_metadata));
    expect(result.heads.pageInfo.hasNextPage).toBe(true);
    expect(t.calls().map((r) => [r.operation, r.query])).toEqual([['listHeadsExt', { limit: '21', skip: '0' }]]);
  });

  it('Q3 paging: the next window skips by the cursor offset, and the end says so', async () => {
    const first = await data(`{ heads(first: 100) { pageInfo { endCursor } } }`);
    t.reset();
    const tailWindow = await data(`query($after: String) { heads(first: 100, after: $after) { nodes { uuid hair { hairMetadata } } } }`, { after: first.heads.pageInfo.endCursor });
    expect(tailWindow.heads.nodes.map((n: any) => n.uuid)).toEqual(ids.slice(100, 200));
    expect(t.calls().map((r) => [r.operation, r.query])).toEqual([['listHeadsExt', { limit: '101', skip: '100' }]]);
    t.reset();
    const last = await data(`{ heads(last: 5) { nodes { uuid headMetadata } pageInfo { hasNextPage hasPreviousPage } } }`);
    expect(last.heads.nodes.map((n: any) => n.uuid)).toEqual(ids.slice(-5));
    expect(last.heads.pageInfo).toEqual({ hasNextPage: false, hasPreviousPage: true });
    // `last` needs the total first: one Get Heads of size 1, then the window.
    expect(operations()).toEqual(['listHeads', 'listHeadsExt']);
  });

  it('totalCount is read only when selected: then one Get Heads of size 1', async () => {
    const result = await data(`{ heads(first: 10) { totalCount nodes { headMetadata } } }`);
    expect(result.heads.totalCount).toBe(ids.length);
    expect(t.calls().map((r) => [r.operation, r.query]).sort()).toEqual([
      ['listHeads', { page: '1', size: '1' }],
      ['listHeadsExt', { limit: '11', skip: '0' }],
    ]);
  });

  it('variant A fields and head_metadata: both listings at once, joined by id', async () => {
    const result = await data(`{ heads(first: 10) { nodes { uuid updatedAt headMetadata hair { gender hairMetadata } } } }`);
    expect(result.heads.nodes.map((n: any) => n.headMetadata)).toEqual(ids.slice(0, 10).map((id) => headA(id).head_metadata));
    expect(result.heads.nodes.map((n: any) => n.updatedAt)).toEqual(ids.slice(0, 10).map((id) => new Date(headA(id).updated_at).toISOString()));
    expect(operations().sort()).toEqual(['listHeads', 'listHeadsExt']);
  });

  it('a style filter (Get Heads Ext has none) falls back to Get Heads and one read per head', async () => {
    const style = headA(ids[0]!).style.label as string;
    const result = await data(`query($style: String) { heads(first: 3, style: $style) { nodes { headMetadata } } }`, { style });
    expect(result.heads.nodes).toHaveLength(3);
    expect(operations().filter((o) => o === 'listHeads')).toHaveLength(1);
    expect(operations().filter((o) => o !== 'listHeads')).toHaveLength(3);
  });

  it('listed heads prime the by-id reads: a later head(id) in the operation costs nothing', async () => {
    const result = await data(`query($id: ID!) { heads(first: 5) { nodes { uuid } } head(id: $id) { name } }`, { id: ids[2] });
    expect(result.head.name).toBe(headA(ids[2]!).name);
    // Root fields run concurrently, so head(id) is planned before the listing answers; the
    // mutation below shows the priming on serial fields instead.
    t.reset();
    const sequence = await t.execute<any>(`mutation($id: ID!) { updateHead(input: { id: $id, name: "Primed" }) { head { name updatedAt hair { gender } } } }`, { id: ids[3] });
    expect(sequence.data.updateHead.head.name).toBe('Primed');
    expect(operations()).toEqual(['updateHead']);
  });
});

describe('PLANNER=off', () => {
  it('keeps the default plan: one extended read per head for headMetadata', async () => {
    const off = await startTestGateway({ env: { PLANNER: 'off' } });
    try {
      const response = await off.execute<any>(`{ heads(first: 4) { nodes { headMetadata } } }`);
      expect(response.data.heads.nodes).toHaveLength(4);
      expect(off.calls().map((r) => r.operation).sort()).toEqual(['getHeadExt', 'getHeadExt', 'getHeadExt', 'getHeadExt', 'listHeads']);
    } finally {
      await off.close();
    }
  });
});
