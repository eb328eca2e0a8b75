import { encodeGlobalID } from '@pothos/plugin-relay';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { HeadShape } from '../src/reference-upstream/store.js';
import { type GraphQLResponse, startTestGateway, type TestGateway } from './support/gateway.js';
import { planOf } from './support/plan.js';

/*
 * The upstream call budget (UPSTREAM_CALL_BUDGET, default 100): an operation whose plan costs
 * more is refused before execution with zero calls; calls execution makes past it anyway
 * (retries) are refused as they come. The plan's count is the real count, or, where data
 * decides (a filtered page, `last` without `before`), an upper bound of it.
 */

/** A gateway with a budget of 50: the planner reads a listing's head_metadata through Get Heads Ext. */
let t: TestGateway;
/** PLANNER=off and a budget of 50: one more read per listed head for head_metadata. */
let plain: TestGateway;
let ids: string[];

beforeAll(async () => {
  [t, plain] = await Promise.all([
    startTestGateway({ env: { UPSTREAM_CALL_BUDGET: '50' } }),
    startTestGateway({ env: { PLANNER: 'off', UPSTREAM_CALL_BUDGET: '50' } }),
  ]);
  ids = t.reference.store.headIds();
});

afterAll(() => Promise.all([t.close(), plain.close()]));

beforeEach(() => {
  t.reset();
  plain.reset();
});

const codes = (response: GraphQLResponse) => (response.errors ?? []).map((e) => e.extensions?.code);
const globalId = (id: string) => encodeGlobalID('Head', id);

/** `n` distinct head ids: the seeded heads (the same in every reference upstream), then unknown UUIDs. */
const distinctIds = (n: number) =>
  [
    ...ids,
    ...Array.from(
      { length: Math.max(0, n - ids.length) },
      (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    ),
  ].slice(0, n);

/** `n` aliases of `head(id:)`, each a different id: 11 tokens each. */
const headAliases = (n: number) =>
  `{ ${distinctIds(n)
    .map((id, i) => `h${i}: head(id: "${id}") { id }`)
    .join(' ')} }`;

function expectBudgetRefusal(
  response: GraphQLResponse,
  estimatedCalls: number,
  budget = 50,
  on: TestGateway = t,
): void {
  expect(response.data ?? undefined).toBeUndefined();
  expect(codes(response)).toEqual(['UPSTREAM_BUDGET_EXCEEDED']);
  expect(response.errors![0]!.extensions).toMatchObject({ estimatedCalls, budget });
  expect(on.calls()).toEqual([]);
}

/** Runs `body` against a gateway built from `env`, then closes it. */
async function withGateway(env: Record<string, string>, body: (g: TestGateway) => Promise<void>): Promise<void> {
  const g = await startTestGateway({ env });
  try {
    await body(g);
  } finally {
    await g.close();
  }
}

describe('estimate before execution', () => {
  it('300 aliases of head(id:) are refused before execution by the limits first, with zero calls', async () => {
    // By default the document (3,302 tokens) trips the token limit while parsing.
    const byTokens = await t.execute(headAliases(300));
    expect(codes(byTokens)).toEqual(['GRAPHQL_PARSE_FAILED']);
    expect(byTokens.errors![0]!.message).toBe('Syntax Error: Token limit of 2000 exceeded.');
    expect(t.calls()).toEqual([]);
    // With room for the tokens, the aliases limit refuses it.
    await withGateway({ MAX_TOKENS: '20000' }, async (g) => {
      const byAliases = await g.execute(headAliases(300));
      expect(codes(byAliases)).toEqual(['GRAPHQL_VALIDATION_FAILED']);
      expect(byAliases.errors![0]!.message).toBe('Aliases limit of 30 exceeded, found 300.');
      expect(g.calls()).toEqual([]);
    });
  });

  it('with the alias and token limits raised, 300 aliases are refused by the budget, with zero calls', async () => {
    await withGateway({ MAX_ALIASES: '1000', MAX_TOKENS: '20000' }, async (g) => {
      expectBudgetRefusal(await g.execute(headAliases(300)), 300, 100, g);
    });
  });

  it('50 aliases fit a budget of 50 and make 50 calls; 51 are refused with zero calls', async () => {
    await withGateway({ MAX_ALIASES: '1000', MAX_TOKENS: '20000', UPSTREAM_CALL_BUDGET: '50' }, async (g) => {
      const fits = await g.execute<Record<string, { id: string }>>(headAliases(50));
      expect(fits.errors).toBeUndefined();
      expect(Object.values(fits.data!).map((h) => h.id)).toEqual(ids.slice(0, 50).map(globalId));
      expect(g.calls()).toHaveLength(50);
      g.reset();
      expectBudgetRefusal(await g.execute(headAliases(51)), 51, 50, g);
    });
  });

  it('without the planner, heads(first: 100) with headMetadata is refused (1 + 100 > 50); first: 40 runs', async () => {
    const query = (n: number) => `{ heads(first: ${n}) { nodes { headMetadata } } }`;
    expect(planOf(query(100), {}, { strategy: 'plain' })).toMatchObject({ calls: 101, exact: false });
    expectBudgetRefusal(await plain.execute(query(100)), 101, 50, plain);

    const fits = await plain.execute<{ heads: { nodes: { headMetadata: unknown }[] } }>(query(40));
    expect(fits.errors).toBeUndefined();
    expect(fits.data!.heads.nodes).toHaveLength(40);
    expect(plain.calls()).toHaveLength(41);
  });

  it('with the planner, heads(first: 100) with headMetadata is one Get Heads Ext call and runs; with a style filter it is refused', async () => {
    const query = `{ heads(first: 100) { nodes { headMetadata } } }`;
    expect(planOf(query)).toMatchObject({ calls: 1, exact: true });
    const runs = await t.execute<{ heads: { nodes: unknown[] } }>(query);
    expect(runs.errors).toBeUndefined();
    expect(runs.data!.heads.nodes).toHaveLength(100);
    expect(t.calls().map((r) => r.operation)).toEqual(['listHeadsExt']);
    t.reset();
    // Get Heads Ext has no style filter: the listing is Get Heads, head_metadata one read per head.
    const style = (
      t.reference.store.project(t.reference.store.findHead(ids[0]!)!, HeadShape.A_EXT) as { style: { label: string } }
    ).style.label;
    expectBudgetRefusal(
      await t.execute(`query($s: String) { heads(first: 100, style: $s) { nodes { headMetadata } } }`, { s: style }),
      101,
    );
  });

  it('follows named fragments and variables', async () => {
    const query = `query Meta($n: Int) { heads(first: $n) { ...Page } } fragment Page on HeadConnection { nodes { ...Head } } fragment Head on Head { name headMetadata }`;
    expectBudgetRefusal(await plain.execute(query, { n: 100 }), 101, 50, plain);
    plain.reset();
    const fits = await plain.execute(query, { n: 40 });
    expect(fits.errors).toBeUndefined();
    expect(plain.calls()).toHaveLength(41);
  });

  it('counts the distinct ids of nodes(ids: $ids), and a variable default when the request leaves it out', async () => {
    const query = `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Head { name } } }`;
    expectBudgetRefusal(await t.execute(query, { ids: ids.slice(0, 51).map(globalId) }), 51);
    t.reset();
    // The same id sixty times is one head: one call.
    const repeated = await t.execute<{ nodes: unknown[] }>(query, {
      ids: Array.from({ length: 60 }, () => globalId(ids[0]!)),
    });
    expect(repeated.errors).toBeUndefined();
    expect(repeated.data!.nodes).toHaveLength(60);
    expect(t.calls()).toHaveLength(1);
    t.reset();
    const fits = await t.execute<{ nodes: unknown[] }>(query, { ids: ids.slice(0, 50).map(globalId) });
    expect(fits.errors).toBeUndefined();
    expect(fits.data!.nodes).toHaveLength(50);
    expect(t.calls()).toHaveLength(50);
    t.reset();

    const defaulted = `query($ids: [ID!]! = [${ids
      .slice(0, 60)
      .map((id) => `"${globalId(id)}"`)
      .join(', ')}]) { nodes(ids: $ids) { ... on Head { name } } }`;
    expectBudgetRefusal(await t.execute(defaulted), 60);
    expectBudgetRefusal(
      await plain.execute(`query($n: Int = 100) { heads(first: $n) { nodes { headMetadata } } }`),
      101,
      50,
      plain,
    );
  });
});

describe("the plan's count is the real count, or an upper bound where data decides", () => {
  interface Case {
    readonly name: string;
    readonly query: string;
    readonly variables?: Record<string, unknown>;
    readonly operationName?: string;
    readonly auth?: boolean;
  }

  const id = (i: number) => ids[i]!;
  /**
   * The head as the upstream's extended variant A read shows it (the seed is the same for every reference upstream).
   */
  const upstreamHead = (i: string) =>
    t.reference.store.project(t.reference.store.findHead(i)!, HeadShape.A_EXT) as {
      name: string;
      style: { label: string };
      hair?: unknown;
    };
  const withHair = () => ids.filter((i) => upstreamHead(i).hair != null);
  const style = () => upstreamHead(id(0)).style.label;
  const search = () => upstreamHead(id(1)).name.split(' ').at(-1)!;

  const cases = (): Case[] => {
    const [h0, h1, h2] = withHair();
    return [
      {
        name: 'head, common fields',
        query: `query($id: ID!) { head(id: $id) { id uuid name url createdAt } }`,
        variables: { id: id(3) },
      },
      {
        name: 'head, every variant A field',
        query: `query($id: ID!) { head(id: $id) { arUrl updatedAt headMetadata hair { name sourceType gender objMetadata payableData { price } updatedAt } } }`,
        variables: { id: h0 },
      },
      {
        name: 'head, Hair B fields',
        query: `query($id: ID!) { head(id: $id) { name hair { hairMetadata userId } } }`,
        variables: { id: h1 },
      },
      {
        name: 'head, metadata, Hair A and B',
        query: `query($id: ID!) { head(id: $id) { headMetadata hair { userId sourceType } } }`,
        variables: { id: h2 },
      },
      {
        name: 'aliases, same and different heads',
        query: `{ a: head(id: "${id(4)}") { name } b: head(id: "${globalId(id(4))}") { uuid } c: head(id: "${h1}") { hair { hairMetadata } } }`,
      },
      {
        name: 'node, inline fragment',
        query: `query($id: ID!) { node(id: $id) { id ... on Head { name updatedAt hair { userId } } } }`,
        variables: { id: globalId(h0!) },
      },
      {
        name: 'nodes, named fragment',
        query: `query($ids: [ID!]!) { nodes(ids: $ids) { ...H } } fragment H on Head { headMetadata hair { hairMetadata } }`,
        variables: { ids: [h0, h1, id(5)].map((i) => globalId(i!)) },
      },
      {
        name: 'heads, listing fields',
        query: `{ heads(first: 5) { totalCount nodes { id name updatedAt hair { name sourceType } } } }`,
      },
      {
        name: 'heads, metadata through a fragment and a variable',
        query: `query($n: Int) { heads(first: $n) { nodes { ...M } } } fragment M on Head { headMetadata }`,
        variables: { n: 7 },
      },
      {
        name: 'heads, search, edges, Hair B',
        query: `query($q: String) { heads(first: 4, search: $q) { pageInfo { hasNextPage } edges { cursor node { hair { hairMetadata userId } } } } }`,
        variables: { q: search() },
      },
      {
        name: 'heads, style filter, metadata and Hair B',
        query: `query($s: String) { heads(first: 3, style: $s) { nodes { headMetadata hair { userId } } } }`,
        variables: { s: style() },
      },
      {
        name: 'heads, last without before',
        query: `{ heads(last: 3) { totalCount pageInfo { hasPreviousPage } nodes { name } } }`,
      },
      {
        name: 'heads, last, metadata, variant A and Hair B',
        query: `{ heads(last: 4) { totalCount nodes { headMetadata updatedAt hair { userId } } } }`,
      },
      {
        name: 'heads, a variable default over the default page',
        query: `query($n: Int = 60) { heads(first: $n) { nodes { headMetadata } } }`,
      },
      { name: 'heads, after a cursor across pages', query: `{ heads(first: 30, after: "CURSOR") { nodes { name } } }` },
      { name: 'permissions, first', query: `{ permissions(first: 3) { totalCount nodes { id role } } }`, auth: true },
      {
        name: 'permissions, last',
        query: `{ permissions(last: 2) { totalCount edges { cursor node { id } } } }`,
        auth: true,
      },
      {
        name: 'two operations, the named one runs',
        query: `query A { heads(first: 90) { nodes { headMetadata } } } query B { ...Roots } fragment Roots on Query { head(id: "${id(6)}") { name } heads(first: 2) { nodes { headMetadata } } }`,
        operationName: 'B',
      },
      {
        name: 'updateHead, then metadata and Hair B of the answer',
        query: `mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id name headMetadata hair { userId } } } }`,
        variables: { input: { id: h2, name: 'Budget Head' } },
      },
      {
        name: 'two updates in one mutation',
        query: `mutation { a: updateHead(input: { id: "${id(7)}", name: "One" }) { head { name } } b: updateHead(input: { id: "${id(8)}", version: { label: "v2" } }) { head { updatedAt hair { hairMetadata } } } }`,
      },
      {
        name: 'login',
        query: `mutation($input: LoginInput!) { login(input: $input) { accessToken tokenType } }`,
        variables: { input: DEMO_CREDENTIALS },
      },
      {
        name: 'updateSubscription',
        query: `mutation($input: UpdateSubscriptionInput!) { updateSubscription(input: $input) { subscription { id active platformType } } }`,
        variables: { input: { active: true } },
        auth: true,
      },
      {
        name: 'deleteHead',
        query: `mutation($input: DeleteHeadInput!) { deleteHead(input: $input) { deletedHeadId } }`,
        variables: { input: { id: globalId(id(9)) } },
        auth: true,
      },
    ];
  };

  // With the planner (the default) and without it: the count must hold for both strategies.
  for (const planner of ['on', 'off'] as const) {
    it(`holds for varied operations (PLANNER=${planner})`, async () => {
      await withGateway({ UPSTREAM_CALL_BUDGET: '1000', PLANNER: planner }, async (g) => {
        const login = await g.execute<{ login: { accessToken: string } }>(
          `mutation($input: LoginInput!) { login(input: $input) { accessToken } }`,
          {
            input: DEMO_CREDENTIALS,
          },
        );
        const authorization = `Bearer ${login.data!.login.accessToken}`;
        const page = await g.execute<{ heads: { pageInfo: { endCursor: string } } }>(
          `{ heads(first: 45) { pageInfo { endCursor } } }`,
        );
        const cursor = page.data!.heads.pageInfo.endCursor;

        const rows: { name: string; planned: number; exact: boolean; actual: number }[] = [];
        const all = cases();
        expect(all.length).toBeGreaterThanOrEqual(20);
        for (const c of all) {
          g.reset();
          const query = c.query.replace('CURSOR', cursor);
          const response = await g.gateway.fetch('http://gateway/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...(c.auth ? { authorization } : {}) },
            body: JSON.stringify({ query, variables: c.variables, operationName: c.operationName }),
          });
          const body = (await response.json()) as GraphQLResponse;
          expect(body.errors, `${c.name}: ${JSON.stringify(body.errors)}`).toBeUndefined();
          const plan = planOf(query, c.variables, {
            strategy: planner === 'on' ? 'selection' : 'plain',
            operationName: c.operationName,
            authorized: c.auth === true,
          });
          rows.push({ name: c.name, planned: plan.calls, exact: plan.exact, actual: g.calls().length });
        }
        expect(rows.filter((r) => r.actual === 0)).toEqual([]);
        expect(rows.filter((r) => (r.exact ? r.planned !== r.actual : r.planned < r.actual))).toEqual([]);
        // Only data-dependent shapes are bounds: a style-filtered page, `last` without `before`.
        expect(rows.filter((r) => !r.exact).map((r) => r.name)).toEqual(
          planner === 'on'
            ? [
                'heads, style filter, metadata and Hair B',
                'heads, last without before',
                'heads, last, metadata, variant A and Hair B',
                'permissions, last',
              ]
            : [
                'heads, metadata through a fragment and a variable',
                'heads, search, edges, Hair B',
                'heads, style filter, metadata and Hair B',
                'heads, last without before',
                'heads, last, metadata, variant A and Hair B',
                'heads, a variable default over the default page',
                'permissions, last',
                'two operations, the named one runs',
              ],
        );
      });
    });
  }
});

describe('the budget during execution', () => {
  it('refuses calls past the budget (retries) with UPSTREAM_BUDGET_EXCEEDED; the upstream gets exactly the budget', async () => {
    await withGateway({ UPSTREAM_CALL_BUDGET: '3' }, async (g) => {
      const query = `{ a: head(id: "${ids[0]}") { uuid arUrl } b: head(id: "${ids[1]}") { uuid arUrl } }`;
      expect(planOf(query).calls).toBe(2);
      // Both first reads fail with 503; one retry fits the budget of 3, the other does not.
      g.reference.injectFault('getHeadExt', { kind: 'status', status: 503 }, 2);
      const response = await g.execute<{ a: { uuid: string } | null; b: { uuid: string } | null }>(query);
      expect(g.calls('getHeadExt')).toHaveLength(3);
      expect(g.calls()).toHaveLength(3);
      const heads = [response.data!.a, response.data!.b];
      expect(heads.filter((h) => h !== null).map((h) => h!.uuid)).toHaveLength(1);
      expect(heads.filter((h) => h === null)).toHaveLength(1);
      expect(codes(response)).toEqual(['UPSTREAM_BUDGET_EXCEEDED']);
      expect(response.errors![0]!.path).toEqual([heads[0] === null ? 'a' : 'b']);
    });
  });

  it('after the first upstream 401 the operation sends nothing more: queued reads fail UNAUTHENTICATED unsent', async () => {
    await withGateway({ UPSTREAM_FANOUT: '1' }, async (g) => {
      g.reference.injectFault('getHeadExt', { kind: 'status', status: 401, body: { detail: 'Not authenticated' } });
      const query = `{ a: head(id: "${ids[0]}") { arUrl } b: head(id: "${ids[1]}") { arUrl } c: head(id: "${ids[2]}") { arUrl } }`;
      const response = await g.execute<Record<string, unknown>>(query, undefined, {
        authorization: 'Bearer not-a-valid-token',
      });
      expect(response.data).toEqual({ a: null, b: null, c: null });
      expect(codes(response)).toEqual(['UNAUTHENTICATED', 'UNAUTHENTICATED', 'UNAUTHENTICATED']);
      expect(response.errors!.map((e) => e.path![0]).sort()).toEqual(['a', 'b', 'c']);
      // Only the read sent before the 401 reached the upstream.
      expect(g.calls()).toHaveLength(1);
      expect(g.calls()[0]).toMatchObject({ operation: 'getHeadExt', status: 401 });
      expect(g.calls()[0]!.headers.authorization).toBe('Bearer not-a-valid-token');
    });
  });
});
