import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestGateway, upstreamHead, type GraphQLResponse, type TestGateway } from './support/gateway.js';

/*
 * Compiled execution (graphql-jit): a query is compiled once it has run twice, and answers as the
 * interpreter does; what it cannot be trusted with stays on the interpreter.
 */

let t: TestGateway;
let ids: string[];
const headA = (id: string) => upstreamHead(t, id);

beforeAll(async () => {
  t = await startTestGateway();
  ids = t.reference.store.headIds();
});

afterAll(() => t.close());
beforeEach(() => t.reset());

/** The same request `times` times: every answer, and the upstream calls each made. */
async function repeated(times: number, query: string, variables?: Record<string, unknown>) {
  const answers: GraphQLResponse<any>[] = [];
  const calls: string[][] = [];
  for (let i = 0; i < times; i++) {
    t.reset();
    answers.push(await t.execute<any>(query, variables));
    calls.push(t.calls().map((r) => String(r.operation)));
  }
  return { answers, calls };
}

describe('compiled execution', () => {
  it('a hot query answers the same compiled as interpreted: data, errors with their paths and locations, calls', async () => {
    const missing = '00000000-0000-4000-8000-000000000000';
    const query = `query Hot($a: ID!, $b: ID!) { a: head(id: $a) { name updatedAt hair { name gender } } b: head(id: $b) { name } heads(first: 3) { totalCount edges { cursor } pageInfo { startCursor endCursor hasNextPage } nodes { uuid } } }`;
    const { answers, calls } = await repeated(4, query, { a: ids[0], b: missing });
    expect(answers[0]!.data!.a).toEqual({ name: headA(ids[0]!).name, updatedAt: new Date(headA(ids[0]!).updated_at).toISOString(), hair: headA(ids[0]!).hair ? { name: headA(ids[0]!).hair.name, gender: headA(ids[0]!).hair.gender.toUpperCase() } : null });
    expect(answers[0]!.errors).toEqual([expect.objectContaining({ path: ['b'], locations: [{ line: 1, column: 87 }], extensions: expect.objectContaining({ code: 'NOT_FOUND' }) })]);
    expect(answers[0]!.data!.heads.pageInfo).toEqual({ startCursor: answers[0]!.data!.heads.edges[0].cursor, endCursor: answers[0]!.data!.heads.edges[2].cursor, hasNextPage: true });
    for (const answer of answers.slice(1)) expect(answer).toEqual(answers[0]);
    for (const made of calls) expect(made.sort()).toEqual(['getHeadById', 'getHeadExt', 'listHeads']);
  });

  it('a query with directives stays interpreted (graphql-jit 0.8 returns fields of an @include nested in a skipped fragment)', async () => {
    const query = `{ heads(first: 1) { nodes { ... @skip(if: true) { hair { ... @include(if: true) { objMetadata } } } hair { name } } } }`;
    const { answers } = await repeated(4, query);
    for (const answer of answers) expect(answer).toEqual({ data: { heads: { nodes: [{ hair: { name: headA(ids[0]!).hair.name } }] } } });
  });

  it('variables that do not coerce are refused as graphql-js refuses them, hot or not', async () => {
    const typed = `query HotTyped($n: Int) { heads(first: $n) { nodes { uuid } } }`;
    await repeated(3, typed, { n: 2 });
    t.reset();
    const refused = await t.execute(typed, { n: 'two' });
    expect(refused.errors).toEqual([
      expect.objectContaining({ extensions: { code: 'BAD_USER_INPUT', fieldErrors: [expect.objectContaining({ path: ['n'], type: 'invalid_variable' })] } }),
    ]);
    expect(t.calls()).toEqual([]);
  });
});
