import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGatewayRuntime, type GatewayRuntime } from '@graphql-hive/gateway-runtime';
import { composeServices } from '@theguild/federation-composition';
import { parse } from 'graphql';
import { createSchema, createYoga } from 'graphql-yoga';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { subgraphSdl } from '../src/schema/subgraph.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { subscribeSse } from './support/sse.js';
import { until } from './support/until.js';

/*
 * The gateway as a subgraph under a real federation gateway: Hive Gateway's runtime, in process, over a supergraph
 * composed by @theguild/federation-composition from this gateway's SUBGRAPH_PATH and a second, small subgraph written
 * here ("ratings"), which references Head by its key, adds `rating` to it and has root fields answering heads by key.
 * Queries cross both; the upstream calls they cost are counted at the reference upstream.
 */

const RATINGS_SDL = `
  extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
  scalar UUID
  type Head @key(fields: "uuid") {
    uuid: UUID!
    "A 1-5 rating, derived here from the head's UUID."
    rating: Int!
  }
  type Query {
    "The first \`count\` heads of the list the ratings subgraph was given, by key only."
    featuredHeads(count: Int!): [Head]!
  }
`;

/** The ratings subgraph: its SDL as `_service` answers it, and by hand the fields a subgraph serves. */
function ratingsSubgraph(heads: () => readonly string[]) {
  const rating = (uuid: string) => (Number.parseInt(uuid.slice(0, 2), 16) % 5) + 1;
  return createYoga({
    logging: false,
    schema: createSchema({
      typeDefs: `${RATINGS_SDL.replace('extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])', '')}
        directive @key(fields: String!) repeatable on OBJECT
        scalar _Any
        union _Entity = Head
        type _Service { sdl: String! }
        extend type Query { _entities(representations: [_Any!]!): [_Entity]! _service: _Service! }`,
      resolvers: {
        Query: {
          featuredHeads: (_: unknown, args: { count: number }) =>
            heads()
              .slice(0, args.count)
              .map((uuid) => ({ uuid })),
          _service: () => ({ sdl: RATINGS_SDL }),
          _entities: (_: unknown, args: { representations: { __typename: string; uuid: string }[] }) =>
            args.representations.map(({ uuid }) => ({ __typename: 'Head', uuid })),
        },
        Head: { rating: (head: { uuid: string }) => rating(head.uuid) },
        _Entity: { __resolveType: () => 'Head' },
      },
    }),
  });
}

const listen = async (server: Server) => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

describe('under Hive Gateway: this gateway at SUBGRAPH_PATH beside a ratings subgraph', () => {
  let t: TestGateway;
  let ratings: Server;
  let router: GatewayRuntime;
  let ids: string[];
  let token: string;
  /** The subgraph each of the router's fetches went to, in order. */
  const fetches: string[] = [];
  const subgraphNames = new Map<string, string>();

  beforeAll(async () => {
    t = await startTestGateway({ env: { SUBGRAPH_PATH: '/subgraph' } });
    ids = t.reference.store.headIds();
    token = t.reference.store.login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)!;
    ratings = createServer(ratingsSubgraph(() => ids));
    const ratingsUrl = `${await listen(ratings)}/graphql`;
    const headsUrl = (await t.listen()).replace(/\/graphql$/, '/subgraph');
    subgraphNames.set(headsUrl, 'heads').set(ratingsUrl, 'ratings');
    const composed = composeServices([
      { name: 'heads', typeDefs: parse(subgraphSdl), url: headsUrl },
      { name: 'ratings', typeDefs: parse(RATINGS_SDL), url: ratingsUrl },
    ]);
    expect(composed.errors).toBeUndefined();
    expect('hints' in composed ? composed.hints : []).toEqual([]);
    router = createGatewayRuntime({
      supergraph: composed.supergraphSdl!,
      logging: false,
      plugins: () => [{ onFetch: ({ url }) => void fetches.push(subgraphNames.get(url) ?? url) }],
      // What the docs ask of a router: the caller's token, its trace and its client's name on to the subgraphs.
      propagateHeaders: {
        fromClientToSubgraphs: ({ request }) => ({
          authorization: request.headers.get('authorization'),
          traceparent: request.headers.get('traceparent'),
        }),
      },
    });
  });
  afterAll(async () => {
    await router?.dispose();
    await new Promise((resolve) => ratings?.close(resolve));
    await t?.close();
  });
  beforeEach(() => {
    t.reference.clearFaults();
    t.reference.resetRecording();
    fetches.length = 0;
  });

  /** A query to the router, as an app sends it. */
  async function query(text: string, variables?: Record<string, unknown>, authorization?: string) {
    const response = await router.fetch('http://router/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(authorization && { authorization }) },
      body: JSON.stringify({ query: text, variables }),
    });
    return (await response.json()) as {
      data?: Record<string, unknown> | null;
      errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }[];
    };
  }
  const calls = () => t.reference.requests.map((request) => request.operation);

  it('a page of heads with the other subgraph’s field: one upstream call (the lower bound), ratings by key', async () => {
    const result = await query('{ heads(first: 20) { nodes { uuid name rating } } }');
    expect(result.errors).toBeUndefined();
    const nodes = (result.data as { heads: { nodes: { uuid: string; name: string; rating: number }[] } }).heads.nodes;
    expect(nodes.map((node) => node.uuid)).toEqual(ids.slice(0, 20));
    for (const node of nodes) expect(node.rating).toBe((Number.parseInt(node.uuid.slice(0, 2), 16) % 5) + 1);
    expect(calls()).toEqual(['listHeads']);
    // The query plan: the page from this subgraph, then the ratings of its 20 heads in one `_entities` fetch.
    expect(fetches).toEqual(['heads', 'ratings']);
  });

  it.each([1, 20, 100])(
    '%i heads by key from the other subgraph’s root field: one read per head (the lower bound), none twice',
    async (count) => {
      const result = await query(
        'query ($count: Int!) { featuredHeads(count: $count) { uuid rating name hair { name } } }',
        {
          count,
        },
      );
      expect(result.errors).toBeUndefined();
      const heads = (result.data as { featuredHeads: { uuid: string; name: string }[] }).featuredHeads;
      expect(heads.map((head) => head.uuid)).toEqual(ids.slice(0, count));
      for (const head of heads) expect(head.name).toBe(t.reference.store.findHead(head.uuid)!.head.name);
      expect(calls()).toEqual(Array.from({ length: count }, () => 'getHeadById'));
      // The keys from the ratings subgraph, then every head in one `_entities` fetch here.
      expect(fetches).toEqual(['ratings', 'heads']);
    },
  );

  it('two tokens interleaved: each read carries its caller’s token, none shared between them', async () => {
    const [a, b] = [`Bearer ${token}`, 'Bearer someone-else'];
    const ask = (authorization: string) => query('{ featuredHeads(count: 3) { uuid name } }', undefined, authorization);
    const answers = await Promise.all([ask(a), ask(b), ask(a), ask(b)]);
    for (const answer of answers) expect(answer.errors).toBeUndefined();
    const byToken = new Map<string, number>();
    for (const request of t.reference.requests)
      byToken.set(request.headers.authorization!, (byToken.get(request.headers.authorization!) ?? 0) + 1);
    // Three heads per query; a caller's two queries may share their reads (shared calls), never another caller's.
    expect([...byToken.keys()].sort()).toEqual([a, b].sort());
    for (const count of byToken.values()) expect(count).toBeGreaterThanOrEqual(3);
  });

  it('an upstream fault on one entity: the others answered, that one null with the gateway’s code', async () => {
    t.reference.injectFault('getHeadById', { kind: 'status', status: 500 }, 1);
    const result = await query('{ featuredHeads(count: 3) { uuid name } }');
    const heads = (result.data as { featuredHeads: ({ uuid: string; name: string } | null)[] } | null)?.featuredHeads;
    expect(heads?.filter((head) => head?.name !== undefined)).toHaveLength(2);
    expect(result.errors?.map((error) => error.extensions?.code)).toContain('UPSTREAM_ERROR');
  });

  it('a head the other subgraph names that does not exist: this subgraph answers null with no error of its own', async () => {
    const known = ids[0]!;
    ids[0] = randomUUID();
    try {
      const result = await query('{ featuredHeads(count: 1) { uuid rating name } }');
      // The router nulls the head (its `name` is non-null) and says so itself; no error comes from this subgraph.
      expect(result.data).toEqual({ featuredHeads: [null] });
      expect(result.errors?.filter((error) => error.extensions?.serviceName !== undefined)).toEqual([]);
      expect(calls()).toEqual(['getHeadById']);
    } finally {
      ids[0] = known;
    }
  });

  it('a subscription on the public endpoint hears a change made through the router', async () => {
    const id = ids[5]!;
    const url = await t.listen();
    const watch = subscribeSse({
      url,
      query: 'subscription ($id: ID!) { headChanged(id: $id) { head { name } } }',
      variables: { id },
    });
    try {
      await until(() => watch.opened, 'the subscription listening');
      const name = `Renamed ${randomUUID().slice(0, 8)}`;
      // The router sends the mutation to the heads subgraph, the only one with it.
      const result = await query(
        'mutation ($input: UpdateHeadInput!) { updateHead(input: $input) { head { uuid name } } }',
        { input: { id, name } },
        `Bearer ${token}`,
      );
      expect(result.errors).toBeUndefined();
      await until(() => watch.events.some((event) => event.data.includes(name)), 'the change heard on /graphql');
    } finally {
      watch.close();
    }
  });
});
