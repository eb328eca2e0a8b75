import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type GraphQLResponse, post, startTestGateway, type TestGateway, upstreamHead } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';

/*
 * Compiled execution (graphql-jit): a query is compiled once it has run twice, and answers as the
 * interpreter does; what it cannot be trusted with stays on the interpreter. The gateway's
 * /metrics say how many operations ran compiled code (counted once that code has run) and what the
 * compiled cache holds: each test that says a query stays interpreted shows beside it that a query
 * like it is compiled, and COMPILED_EXECUTION=off compiles nothing.
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

/** Operations run by compiled code so far, and the compiled documents kept (count, estimated bytes). */
async function compiledOf(on: TestGateway) {
  const text = await on.metrics.scrape();
  return {
    runs: sampleOf(text, 'gateway_compiled_executions_total') ?? 0,
    entries: sampleOf(text, 'gateway_document_cache_entries{cache="compiled"}'),
    bytes: sampleOf(text, 'gateway_document_cache_bytes{cache="compiled"}'),
  };
}

/** The same request `times` times (on `t` unless told): every answer, and the upstream calls each made. */
async function repeated(times: number, query: string, variables?: Record<string, unknown>, on: TestGateway = t) {
  const answers: GraphQLResponse<any>[] = [];
  const calls: string[][] = [];
  for (let i = 0; i < times; i++) {
    on.reset();
    answers.push(await on.execute<any>(query, variables));
    calls.push(on.calls().map((r) => String(r.operation)));
  }
  return { answers, calls };
}

/** Nullable root fields only (a non-null one beside others is never compiled): compiled at its second run. */
const HOT = `query Hot($a: ID!, $b: ID!, $c: ID!) { a: head(id: $a) { name updatedAt hair { name gender } } b: head(id: $b) { name } c: node(id: $c) { id ... on Head { uuid name } } }`;
const MISSING = '00000000-0000-4000-8000-000000000000';
/** HOT's variables: a head, one that does not exist (an error at `b`), another head by `node`. */
const hotVariables = () => ({ a: ids[0], b: MISSING, c: ids[1] });

describe('compiled execution', () => {
  it('a hot query answers the same compiled as interpreted: data, errors with their paths and locations, calls', async () => {
    const before = await compiledOf(t);
    const { answers, calls } = await repeated(4, HOT, hotVariables());
    // Interpreted once, then compiled: three runs of compiled code, one more document kept.
    expect(await compiledOf(t)).toMatchObject({ runs: before.runs + 3, entries: before.entries! + 1 });
    expect(answers[0]!.data!.a).toEqual({
      name: headA(ids[0]!).name,
      updatedAt: new Date(headA(ids[0]!).updated_at).toISOString(),
      hair: headA(ids[0]!).hair
        ? { name: headA(ids[0]!).hair.name, gender: headA(ids[0]!).hair.gender.toUpperCase() }
        : null,
    });
    expect(answers[0]!.data!.b).toBeNull();
    expect(answers[0]!.errors).toEqual([
      expect.objectContaining({
        path: ['b'],
        locations: [{ line: 1, column: 96 }],
        extensions: expect.objectContaining({ code: 'NOT_FOUND' }),
      }),
    ]);
    expect(answers[0]!.data!.c).toEqual({ id: expect.any(String), uuid: ids[1], name: headA(ids[1]!).name });
    for (const answer of answers.slice(1)) expect(answer).toEqual(answers[0]);
    for (const made of calls) expect(made.sort()).toEqual(['getHeadById', 'getHeadById', 'getHeadExt']);
  });

  it('a non-null root beside other roots stays interpreted, and answers as before', async () => {
    // Its failure nulls the whole answer: graphql-js stops there, graphql-jit 0.8 runs every root to its end.
    const query = `query Beside($a: ID!, $b: ID!) { a: head(id: $a) { name } b: head(id: $b) { name } heads(first: 3) { totalCount edges { cursor } pageInfo { startCursor endCursor hasNextPage } } }`;
    const before = await compiledOf(t);
    const { answers, calls } = await repeated(4, query, { a: ids[0], b: MISSING });
    expect(await compiledOf(t)).toEqual(before);
    expect(answers[0]!.data!.a).toEqual({ name: headA(ids[0]!).name });
    expect(answers[0]!.errors).toEqual([
      expect.objectContaining({
        path: ['b'],
        locations: [{ line: 1, column: 59 }],
        extensions: expect.objectContaining({ code: 'NOT_FOUND' }),
      }),
    ]);
    const { heads } = answers[0]!.data!;
    expect(heads).toMatchObject({
      totalCount: ids.length,
      pageInfo: { startCursor: heads.edges[0].cursor, endCursor: heads.edges[2].cursor, hasNextPage: true },
    });
    for (const answer of answers.slice(1)) expect(answer).toEqual(answers[0]);
    for (const made of calls) expect(made.sort()).toEqual(['getHeadById', 'getHeadById', 'listHeads']);
    // Its non-null root alone is compiled: it is the roots beside it that kept it out.
    const { answers: alone } = await repeated(
      3,
      `query Alone { heads(first: 3) { totalCount edges { cursor } pageInfo { startCursor endCursor hasNextPage } } }`,
    );
    expect(alone.at(-1)).toEqual({ data: { heads } });
    expect(await compiledOf(t)).toMatchObject({ runs: before.runs + 2, entries: before.entries! + 1 });
  });

  it('a query with directives stays interpreted (graphql-jit 0.8 returns fields of an @include nested in a skipped fragment)', async () => {
    const query = `{ heads(first: 1) { nodes { ... @skip(if: true) { hair { ... @include(if: true) { objMetadata } } } hair { name } } } }`;
    const before = await compiledOf(t);
    const { answers } = await repeated(4, query);
    for (const answer of answers)
      expect(answer).toEqual({ data: { heads: { nodes: [{ hair: { name: headA(ids[0]!).hair.name } }] } } });
    expect(await compiledOf(t)).toEqual(before);
    // The same selection without its directives is compiled: it is the directives that kept it out.
    const { answers: plain } = await repeated(4, `{ heads(first: 1) { nodes { hair { name } } } }`);
    expect(plain.at(-1)).toEqual(answers[0]);
    expect(await compiledOf(t)).toMatchObject({ runs: before.runs + 3, entries: before.entries! + 1 });
  });

  it('variables that do not coerce are refused as graphql-js refuses them, hot or not', async () => {
    const typed = `query HotTyped($n: Int) { heads(first: $n) { nodes { uuid } } }`;
    await repeated(3, typed, { n: 2 });
    t.reset();
    const refused = await t.execute(typed, { n: 'two' });
    expect(refused.errors).toEqual([
      expect.objectContaining({
        extensions: {
          code: 'BAD_USER_INPUT',
          fieldErrors: [expect.objectContaining({ path: ['n'], type: 'invalid_variable' })],
        },
      }),
    ]);
    expect(t.calls()).toEqual([]);
  });

  it('a document of several operations runs each by its name, interpreted', async () => {
    const document = `query First { heads(first: 1) { nodes { name } } } query Second { heads(first: 2) { totalCount } }`;
    const before = await compiledOf(t);
    for (let i = 0; i < 3; i++) {
      expect((await post(t, { query: document, operationName: 'First' })).body).toEqual({
        data: { heads: { nodes: [{ name: headA(ids[0]!).name }] } },
      });
      expect((await post(t, { query: document, operationName: 'Second' })).body).toEqual({
        data: { heads: { totalCount: ids.length } },
      });
    }
    expect(await compiledOf(t)).toEqual(before);
    // The first operation alone in its document is compiled: it is the second one that kept it out.
    await repeated(3, `query First { heads(first: 1) { nodes { name } } }`);
    expect(await compiledOf(t)).toMatchObject({ runs: before.runs + 2, entries: before.entries! + 1 });
  });
});

describe('COMPILED_EXECUTION=off', () => {
  let off: TestGateway;
  beforeAll(async () => {
    off = await startTestGateway({ env: { COMPILED_EXECUTION: 'off' } });
  });
  afterAll(() => off.close());

  it('compiles nothing: a hot query runs interpreted every time, and answers as compiled code does', async () => {
    const { answers, calls } = await repeated(4, HOT, hotVariables(), off);
    expect(await compiledOf(off)).toEqual({ runs: 0, entries: undefined, bytes: undefined });
    // The compiled answers from a default gateway of its own: on the shared one, HOT's first runs
    // (interpreted once, then compiled) are the hot-query test's to count, in whatever order they run.
    const on = await startTestGateway();
    try {
      await repeated(2, HOT, hotVariables(), on);
      const compiled = await repeated(4, HOT, hotVariables(), on);
      // Compiled at its second run: the four compared here all ran compiled code.
      expect(await compiledOf(on)).toMatchObject({ runs: 5, entries: 1 });
      expect(answers).toEqual(compiled.answers);
      expect(calls).toEqual(compiled.calls);
    } finally {
      await on.close();
    }
  });
});

describe('the compiled documents kept', () => {
  const HEAD =
    'id uuid name url arUrl outputFormat style version lod headMetadata createdAt updatedAt hair { id name url thumbnailUrl style createdAt sourceType gender objMetadata payableData { price description } updatedAt hairMetadata userId }';
  /** Distinct query `n`: `aliases` × 29 field selections, each alias a nullable root (so it may be compiled). */
  const wide = (n: number, aliases: number) =>
    `query Wide${n} { ${Array.from({ length: aliases }, (_, k) => `a${k}: head(id: "${ids[0]}") { ${HEAD} }`).join(' ')} }`;
  const twice = async (on: TestGateway, query: string) => {
    for (let i = 0; i < 2; i++) expect((await on.execute(query)).errors).toBeUndefined();
  };

  it('are bounded by count, the least recently used dropped first', async () => {
    const small = await startTestGateway({ env: { COMPILED_EXECUTION_MAX_ENTRIES: '2' } });
    try {
      for (const n of [1, 2, 3]) await twice(small, `query Q${n} { heads(first: ${n}) { nodes { uuid } } }`);
      expect(await compiledOf(small)).toMatchObject({ runs: 3, entries: 2 });
      // Q1 was dropped: it is compiled again, and answers the same.
      expect(await small.execute(`query Q1 { heads(first: 1) { nodes { uuid } } }`)).toEqual({
        data: { heads: { nodes: [{ uuid: ids[0] }] } },
      });
      expect(await compiledOf(small)).toMatchObject({ runs: 4, entries: 2 });
    } finally {
      await small.close();
    }
  });

  it('are bounded by their estimated heap; a query larger than the whole budget stays interpreted', async () => {
    const budget = 1024 * 1024;
    const small = await startTestGateway({ env: { COMPILED_EXECUTION_MAX_BYTES: String(budget) } });
    try {
      await twice(small, wide(0, 2));
      const one = (await compiledOf(small)).bytes!;
      // Kept, so weighed: the loop below counts on it.
      expect(one).toBeGreaterThan(0);
      const fit = Math.floor(budget / one);
      expect(fit).toBeGreaterThanOrEqual(1);
      for (let n = 1; n <= fit; n++) await twice(small, wide(n, 2));
      expect(await compiledOf(small)).toEqual({ runs: fit + 1, entries: fit, bytes: fit * one });
      // Six aliases weigh three times two.
      expect(3 * one).toBeGreaterThan(budget);
      for (let i = 0; i < 3; i++) expect((await small.execute(wide(100, 6))).errors).toBeUndefined();
      expect(await compiledOf(small)).toEqual({ runs: fit + 1, entries: fit, bytes: fit * one });
    } finally {
      await small.close();
    }
  });
});

describe('COMPILED_EXECUTION_AT_RUN=1 and COMPILED_EXECUTION_MAX_FIELDS=3', () => {
  let eager: TestGateway;
  beforeAll(async () => {
    eager = await startTestGateway({ env: { COMPILED_EXECUTION_AT_RUN: '1', COMPILED_EXECUTION_MAX_FIELDS: '3' } });
  });
  afterAll(() => eager.close());

  it('compiles a query at its first run, up to three field selections; one more stays interpreted however often it runs', async () => {
    const uuids = { data: { heads: { nodes: [{ uuid: ids[0] }] } } };
    expect(await eager.execute('{ heads(first: 1) { nodes { uuid } } }')).toEqual(uuids);
    expect(await compiledOf(eager)).toMatchObject({ runs: 1, entries: 1 });
    for (let i = 0; i < 3; i++)
      expect(await eager.execute('{ heads(first: 1) { nodes { uuid name } } }')).toEqual({
        data: { heads: { nodes: [{ uuid: ids[0], name: headA(ids[0]!).name }] } },
      });
    expect(await compiledOf(eager)).toMatchObject({ runs: 1, entries: 1 });
  });
});
