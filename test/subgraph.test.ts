import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { composeServices } from '@theguild/federation-composition';
import { type GraphQLFormattedError, parse } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { printedSubgraphSchema, subgraphSchemaFile } from '../scripts/print-schema.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { subgraphSdl } from '../src/schema/subgraph.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The subgraph schema (src/schema/subgraph.ts): the SDL a router composes, with no error or hint beside a second
 * subgraph that references Head by its key; served at SUBGRAPH_PATH over a loopback port, on the reference upstream:
 * `_entities` planned ahead as `nodes(ids:)` is (the heads in order, null for one that does not exist, counted against
 * the call budget), malformed representations refused with a code before any call, each caller's token its own.
 */

const RATINGS = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
  scalar UUID
  type Head @key(fields: "uuid") { uuid: UUID! rating: Int! }
  type Query { featuredHead: Head }
`;

describe('the subgraph SDL', () => {
  it('is schema.subgraph.graphql as committed (run `npm run schema` when this fails)', () => {
    expect(readFileSync(subgraphSchemaFile, 'utf8') === printedSubgraphSchema()).toBe(true);
  });

  it('links Federation v2, keys Head by its UUID, and leaves out what a subgraph does not serve', () => {
    expect(subgraphSdl).toMatch(
      /^schema @link\(url: "https:\/\/specs\.apollo\.dev\/federation\/v2\.\d+", import: \["@key"\]\)/,
    );
    expect(subgraphSdl).toContain('type Head implements Node @key(fields: "uuid") {');
    expect(subgraphSdl).not.toMatch(
      /type Subscription \{|type HeadChange \{|@(live|defer|stream)\b|_entities|_service/,
    );
    // Hair is no entity: the contract reads a hair only through its head.
    expect(subgraphSdl).toMatch(/type Hair \{/);
  });

  it('composes beside a subgraph that extends Head, with no error and no hint', () => {
    const result = composeServices([
      { name: 'heads', typeDefs: parse(subgraphSdl), url: 'http://heads.local/subgraph' },
      { name: 'ratings', typeDefs: parse(RATINGS), url: 'http://ratings.local/graphql' },
    ]);
    expect(result.errors).toBeUndefined();
    expect('hints' in result ? result.hints : []).toEqual([]);
    expect(result.supergraphSdl).toMatch(/type Head implements Node[^{]*\{[^}]*rating: Int!/s);
  });
});

const ENTITIES = `query Entities($representations: [_Any!]!) {
  _entities(representations: $representations) { ... on Head { uuid name hair { name } } }
}`;
const head = (id: string) => ({ __typename: 'Head', uuid: id });

/** A POST to the gateway `t` serves, as a router sends it (its own Authorization forwarded, if any). */
async function postTo(t: TestGateway, path: string, query: string, variables?: unknown, authorization?: string) {
  const response = await t.gateway.fetch(`http://gateway${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization && { authorization }) },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as {
    data?: { _entities: ({ uuid: string; name: string } | null)[] } | null;
    errors?: GraphQLFormattedError[];
  };
  return { status: response.status, ...body };
}

describe('SUBGRAPH_PATH=/subgraph: the subgraph served through the same stages', () => {
  let t: TestGateway;
  let ids: string[];

  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBGRAPH_PATH: '/subgraph' } });
    ids = t.reference.store.headIds();
  });
  afterAll(() => t?.close());
  beforeEach(() => t.reference.resetRecording());

  const post = (path: string, query: string, variables?: unknown, authorization?: string) =>
    postTo(t, path, query, variables, authorization);
  const entities = (representations: unknown, authorization?: string) =>
    post('/subgraph', ENTITIES, { representations }, authorization);

  it('_service answers the SDL the router composes; /graphql has no subgraph fields', async () => {
    expect(await post('/subgraph', '{ _service { sdl } }')).toEqual({
      status: 200,
      data: { _service: { sdl: subgraphSdl } },
    });
    const plain = await post('/graphql', '{ _service { sdl } }');
    expect(plain.errors?.[0]?.extensions?.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(t.reference.requests).toHaveLength(0);
  });

  it('answers the heads in the order given, one read per distinct head, the same head twice read once', async () => {
    const asked = [ids[2]!, ids[0]!, ids[2]!.toUpperCase(), ids[1]!];
    const { data, errors } = await entities(asked.map(head));
    expect(errors).toBeUndefined();
    expect(data!._entities.map((entity) => entity!.uuid)).toEqual(asked.map((id) => id.toLowerCase()));
    expect(t.reference.requests.map((request) => request.operation)).toEqual([
      'getHeadById',
      'getHeadById',
      'getHeadById',
    ]);
  });

  it("the subgraph's prepared documents count in the same gauge as /graphql's", async () => {
    const parsed = async () =>
      (await t.metrics.registry.getSingleMetric('gateway_document_cache_entries')!.get()).values.find(
        (value) => value.labels.cache === 'parsed',
      )!.value;
    const before = await parsed();
    await post('/subgraph', `{ _service { sdl } } # ${randomUUID()}`);
    expect(await parsed()).toBe(before + 1);
  });

  it('a head that does not exist is null with no error, in its place', async () => {
    const { data, errors } = await entities([head(ids[0]!), head(randomUUID()), head(ids[1]!)]);
    expect(errors).toBeUndefined();
    expect(data!._entities.map((entity) => entity?.uuid ?? null)).toEqual([ids[0], null, ids[1]]);
  });

  it.each([
    ['another type', { __typename: 'Hair', uuid: randomUUID() }],
    ['no __typename', { uuid: randomUUID() }],
    ['a key that is no UUID', { __typename: 'Head', uuid: 'not-a-uuid' }],
    ['the wrong key', { __typename: 'Head', id: randomUUID() }],
    ['not an object', 'Head'],
  ])('a malformed representation (%s) is BAD_USER_INPUT at its index, with no upstream call', async (_, bad) => {
    const { data, errors } = await entities([head(ids[0]!), bad]);
    expect(data).toBeNull();
    expect(errors).toEqual([
      expect.objectContaining({
        path: ['_entities'],
        extensions: expect.objectContaining({
          code: 'BAD_USER_INPUT',
          fieldErrors: [expect.objectContaining({ path: ['representations', 1], type: 'invalid_representation' })],
        }),
      }),
    ]);
    expect(t.reference.requests).toHaveLength(0);
  });

  it('counted by the plan before execution: more distinct heads than UPSTREAM_CALL_BUDGET (100) are refused whole, with no call', async () => {
    const many = Array.from({ length: 101 }, (_, index) => head(ids[index % ids.length]!));
    expect(new Set(many.map((representation) => representation.uuid)).size).toBe(101);
    const { data, errors } = await entities(many);
    expect(data ?? null).toBeNull();
    expect(errors?.[0]?.extensions).toMatchObject({ code: 'UPSTREAM_BUDGET_EXCEEDED', estimatedCalls: 101 });
    expect(t.reference.requests).toHaveLength(0);
  });

  it("forwards each caller's token to the upstream, and two tokens interleaved never share a read", async () => {
    const [a, b] = ['Bearer token-a', 'Bearer token-b'];
    const answers = await Promise.all([entities([head(ids[0]!)], a), entities([head(ids[0]!)], b)]);
    for (const answer of answers) expect(answer.data!._entities[0]!.uuid).toBe(ids[0]);
    expect(t.reference.requests.map((request) => request.headers.authorization).sort()).toEqual([a, b]);
  });
});

describe('SUBGRAPH_PATH unset (the default)', () => {
  it('no subgraph is served', async () => {
    const t = await startTestGateway();
    try {
      const response = await t.gateway.fetch('http://gateway/subgraph', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ _service { sdl } }' }),
      });
      expect(response.status).toBe(404);
    } finally {
      await t.close();
    }
  });
});

describe('SUBGRAPH_PATH with MAX_RESULT_ITEMS=5 and the response cache on (RESPONSE_CACHE_TTL_MS)', () => {
  let t: TestGateway;
  let ids: string[];
  beforeAll(async () => {
    t = await startTestGateway({
      env: { SUBGRAPH_PATH: '/subgraph', MAX_RESULT_ITEMS: '5', RESPONSE_CACHE_TTL_MS: '60000' },
    });
    ids = t.reference.store.headIds();
  });
  afterAll(() => t?.close());
  beforeEach(() => t.reference.resetRecording());
  const entities = (representations: unknown, authorization?: string) =>
    postTo(t, '/subgraph', ENTITIES, { representations }, authorization);

  it('more representations than MAX_RESULT_ITEMS are refused RESULT_TOO_LARGE, with no call', async () => {
    const { data, errors } = await entities(ids.slice(10, 16).map(head));
    expect(data ?? null).toBeNull();
    expect(errors?.[0]?.extensions).toMatchObject({ code: 'RESULT_TOO_LARGE' });
    expect(t.reference.requests).toHaveLength(0);
    expect((await entities(ids.slice(10, 15).map(head))).errors).toBeUndefined();
  });

  it("a kept answer is its caller's: another token's same question is read for it, the first's again is kept", async () => {
    const [a, b] = ['Bearer cache-a', 'Bearer cache-b'];
    const asked = [head(ids[20]!)];
    const first = await entities(asked, a);
    const other = await entities(asked, b);
    const again = await entities(asked, a);
    for (const answer of [first, other, again]) expect(answer.data!._entities[0]!.uuid).toBe(ids[20]);
    expect(t.reference.requests.map((request) => request.headers.authorization)).toEqual([a, b]);
  });

  it('one response cache for both endpoints: a change made through /graphql evicts what the subgraph kept of that head', async () => {
    const id = ids[30]!;
    const token = `Bearer ${t.reference.store.login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)!}`;
    expect((await entities([head(id)], token)).data!._entities[0]!.name).toBe(
      t.reference.store.findHead(id)!.head.name,
    );
    const name = `Renamed ${id.slice(0, 8)}`;
    const renamed = await postTo(
      t,
      '/graphql',
      'mutation ($input: UpdateHeadInput!) { updateHead(input: $input) { head { uuid name } } }',
      { input: { id, name } },
      token,
    );
    expect(renamed.errors).toBeUndefined();
    expect((await entities([head(id)], token)).data!._entities[0]!.name).toBe(name);
  });
});
