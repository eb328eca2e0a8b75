import { getNullableType, isListType, isObjectType } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { factsOf } from '../src/plan/facts.js';
import { schema } from '../src/schema/index.js';
import { type Answer, type GraphQLResponse, post, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { planOf } from './support/plan.js';
import { until } from './support/until.js';

/*
 * Bounded answers (MAX_RESULT_ITEMS, MAX_RESPONSE_BYTES): the plan counts the list entries an
 * operation can answer and refuses it before any upstream call; one HTTP request (a batch)
 * shares the items limit and the call budget; an answer over the byte limit anyway is replaced by
 * an error; a client that hangs up gets nothing serialised.
 */

let t: TestGateway;
let ids: string[];

beforeAll(async () => {
  t = await startTestGateway({ env: { NODE_ENV: 'production', UPSTREAM_URL: 'http://unused/v2' } });
  ids = t.reference.store.headIds();
});
afterAll(() => t.close());
beforeEach(() => t.reset());

/** Every field of a head and its hair: the heaviest item the schema has. */
const everyField =
  'id uuid name url arUrl outputFormat style version lod headMetadata createdAt updatedAt hair { id name url thumbnailUrl style createdAt sourceType gender objMetadata payableData { price description } updatedAt hairMetadata userId }';
const pages = (aliases: number, first: number) =>
  `{ ${Array.from({ length: aliases }, (_, i) => `a${i}: heads(first: ${first}) { totalCount pageInfo { hasNextPage endCursor } nodes { ${everyField} } }`).join(' ')} }`;

type Batch = Answer<GraphQLResponse[]>;
const codes = (response: GraphQLResponse) => (response.errors ?? []).map((e) => e.extensions?.code);
const refusals = async (on: TestGateway, limit: string) =>
  sampleOf(await on.metrics.registry.metrics(), `gateway_refusals_total{limit="${limit}"}`) ?? 0;

describe('the plan counts the list entries an answer can hold', () => {
  it('a connection counts its window once per list selected under it: nodes and edges each, merged fragments once', () => {
    expect(planOf('{ heads(first: 100) { nodes { name } } }').items).toBe(100);
    expect(planOf('{ heads { nodes { name } } }').items).toBe(50);
    expect(planOf('{ heads(last: 30) { nodes { name } } }').items).toBe(30);
    expect(planOf('{ heads(first: 10) { totalCount pageInfo { hasNextPage } } }').items).toBe(0);
    expect(planOf('{ heads(first: 10) { nodes { name } edges { cursor node { name } } } }').items).toBe(20);
    // Two fragments selecting `edges` (as Relay composes them): one list, as execution merges it.
    const relay =
      'query { heads(first: 10) { ...A ...B } } fragment A on HeadConnection { edges { node { name } } } fragment B on HeadConnection { edges { cursor } }';
    expect(planOf(relay).items).toBe(10);
    // Aliases are lists of their own.
    expect(planOf('{ heads(first: 10) { a: nodes { name } b: nodes { url } } }').items).toBe(20);
    expect(planOf('{ x: heads(first: 10) { nodes { name } } y: heads(first: 20) { nodes { name } } }').items).toBe(30);
  });

  it('nodes(ids:) counts its ids; @skip/@include and variables are read as execution reads them', () => {
    expect(planOf('query($ids: [ID!]!) { nodes(ids: $ids) { id } }', { ids: ids.slice(0, 7) }).items).toBe(7);
    expect(planOf(`{ nodes(ids: ["${ids[0]}", "${ids[0]}"]) { id } }`).items).toBe(2);
    expect(planOf('query($n: Int) { heads(first: $n) { nodes { name } } }', { n: 80 }).items).toBe(80);
    expect(planOf('query($s: Boolean!) { heads(first: 10) { nodes @skip(if: $s) { name } } }', { s: true }).items).toBe(
      0,
    );
    expect(
      planOf('query($s: Boolean!) { heads(first: 10) { nodes @skip(if: $s) { name } } }', { s: false }).items,
    ).toBe(10);
    // Arguments the field refuses answer nothing: the field's own error says why.
    expect(planOf('{ heads(first: 101) { nodes { name } } }').items).toBe(0);
    expect(planOf(`{ head(id: "${ids[0]}") { name hair { name } } }`).items).toBe(0);
  });

  it('every list field of the schema says how long it is', () => {
    const undeclared = Object.values(schema.getTypeMap())
      .filter((type) => isObjectType(type) && !type.name.startsWith('__'))
      .flatMap((type) =>
        Object.values((type as import('graphql').GraphQLObjectType).getFields()).map((field) => ({
          coordinate: `${type.name}.${field.name}`,
          field,
        })),
      )
      .filter(({ field }) => isListType(getNullableType(field.type)) && factsOf(field).items === undefined)
      .map(({ coordinate }) => coordinate);
    expect(undeclared).toEqual([]);
  });
});

describe('result items (MAX_RESULT_ITEMS, default 1000)', () => {
  it('30 aliases of heads(first: 100) with every field are refused before any upstream call', async () => {
    const before = await refusals(t, 'items');
    const refused = await post(t, { query: pages(30, 100) });
    expect(refused.body.data).toBeUndefined();
    expect(codes(refused.body)).toEqual(['RESULT_TOO_LARGE']);
    expect(refused.body.errors![0]!.extensions).toEqual({
      code: 'RESULT_TOO_LARGE',
      limit: 'items',
      estimatedItems: 3000,
      maxItems: 1000,
    });
    expect(refused.body.errors![0]!.message).toBe(
      'This operation could answer 3000 list items; the limit is 1000. Ask for smaller pages or fewer aliases.',
    );
    expect(t.calls()).toEqual([]);
    expect(await refusals(t, 'items')).toBe(before + 1);
  });

  it('exactly 1000 items run: 10 aliases of heads(first: 100), in two calls', async () => {
    const ran = await post(t, { query: pages(10, 100) });
    expect(ran.body.errors).toBeUndefined();
    expect(Object.values(ran.body.data!).map((page) => (page as { nodes: unknown[] }).nodes.length)).toEqual(
      Array(10).fill(100),
    );
    expect(t.calls()).toHaveLength(2);
  });

  it('a batch shares one items limit: the operations that would pass it are refused, those before keep their answers', async () => {
    const got = (await post(t, [
      { query: pages(6, 100) },
      { query: pages(5, 100) },
      { query: pages(4, 100) },
    ])) as unknown as Batch;
    expect(got.status).toBe(200);
    expect(got.body[0]!.errors).toBeUndefined();
    expect(Object.keys(got.body[0]!.data!)).toHaveLength(6);
    // 600 + 500 > 1000: refused, with its own count; 600 + 400 fits.
    expect(got.body[1]!.errors![0]!.extensions).toEqual({
      code: 'RESULT_TOO_LARGE',
      limit: 'items',
      estimatedItems: 500,
      maxItems: 1000,
    });
    expect(got.body[1]!.errors![0]!.message).toBe(
      "This operation could answer 500 list items (its batch's other operations already plan 600 items); the limit is 1000. Ask for smaller pages or fewer aliases.",
    );
    expect(got.body[2]!.errors).toBeUndefined();
    // The two operations that ran read the same window: one listing, one total.
    expect(t.calls()).toHaveLength(2);
  });
});

describe('one call budget per request (UPSTREAM_CALL_BUDGET, default 100)', () => {
  it('a batch of 10 nodes(ids:) with 100 ids each makes 100 upstream calls, not 1,000', async () => {
    const query = 'query($ids: [ID!]!) { nodes(ids: $ids) { id } }';
    const many = Array.from(
      { length: 100 },
      (_, i) => ids[i] ?? `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    );
    const before = await refusals(t, 'budget');
    const got = (await post(
      t,
      Array.from({ length: 10 }, () => ({ query, variables: { ids: many } })),
    )) as unknown as Batch;
    expect(got.body[0]!.data!.nodes).toHaveLength(100);
    for (const refused of got.body.slice(1)) {
      expect(refused.data).toBeUndefined();
      expect(refused.errors![0]!.extensions).toEqual({
        code: 'UPSTREAM_BUDGET_EXCEEDED',
        limit: 'budget',
        estimatedCalls: 100,
        budget: 100,
      });
    }
    expect(t.calls()).toHaveLength(100);
    expect(await refusals(t, 'budget')).toBe(before + 9);
  });

  it('30 aliased windows of different pages are refused by the items limit, with zero calls', async () => {
    const windows = `{ ${Array.from({ length: 30 }, (_, i) => `w${i}: heads(first: 100, after: "${Buffer.from(`OffsetConnection:${i * 7}`).toString('base64')}") { nodes { ${everyField} } }`).join(' ')} }`;
    expect(codes((await post(t, { query: windows })).body)).toEqual(['RESULT_TOO_LARGE']);
    expect(t.calls()).toEqual([]);
  });
});

describe('answer bytes (MAX_RESPONSE_BYTES, default 4 MiB)', () => {
  let small: TestGateway;
  beforeAll(async () => {
    small = await startTestGateway({ env: { MAX_RESPONSE_BYTES: '200000' } });
  });
  afterAll(() => small.close());

  it('an answer over the limit is replaced by RESULT_TOO_LARGE; a batch keeps the answers written before it', async () => {
    const one = pages(1, 100); // some 95 KB of JSON
    const fits = await post(small, { query: one });
    expect(fits.body.errors).toBeUndefined();
    const over = await post(small, { query: pages(3, 100) });
    expect(over.body).toEqual({
      errors: [
        {
          message: 'The answer is larger than 200000 bytes. Ask for smaller pages, fewer fields or fewer aliases.',
          extensions: { code: 'RESULT_TOO_LARGE', limit: 'response_bytes', maxResponseBytes: 200000 },
        },
      ],
    });
    const batch = (await post(small, [{ query: one }, { query: one }, { query: one }])) as unknown as Batch;
    expect(batch.body.map((answer) => codes(answer))).toEqual([[], [], ['RESULT_TOO_LARGE']]);
    expect(batch.body[1]!.data).toEqual(batch.body[0]!.data);
    expect(await refusals(small, 'response_bytes')).toBe(2);
  });
});

describe('a client that hangs up', () => {
  it('gets no answer serialised, and no error of ours is logged', async () => {
    const url = await t.listen();
    // The first operation is answered at once; the second waits on a read the upstream holds.
    t.reference.injectFault('getHeadExt', { kind: 'latency', ms: 600_000 });
    const controller = new AbortController();
    const pending = fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify([{ query: pages(1, 100) }, { query: `{ head(id: "${ids[0]}") { updatedAt } }` }]),
      signal: controller.signal,
    });
    await until(() => t.reference.inFlight() === 1, 'the read held at the upstream');
    controller.abort();
    await expect(pending).rejects.toThrow();
    await until(
      async () => (sampleOf(await t.metrics.registry.metrics(), 'gateway_abandoned_answers_total') ?? 0) === 2,
      'both answers abandoned',
    );
    await until(() => t.reference.inFlight() === 0, 'the held read cancelled');
    expect(t.logLines.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
