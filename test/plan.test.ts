import { parse, visit } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { SelectionAnalysis } from '../src/plan/analyze.js';
import { Planner } from '../src/plan/operation-plan.js';
import { schema } from '../src/schema/index.js';
import { fanOut, plainOfLength } from './support/attacks.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The planner's own guarantees: plans are cached per document beside the prepared documents, so a hot
 * operation costs no selection analysis; and analysis is linear in the document, so a document
 * built to make a naive fragment walk explode costs what any document of its size costs, counted
 * in selection sets read, not timed (its wall-clock twin is a bench check: bench/checks/).
 */

let t: TestGateway;
/** The fan-out document repeats `nodes` 190 times in one selection, which MAX_REPEATED_FIELDS refuses by default. */
let roomy: TestGateway;

beforeAll(async () => {
  [t, roomy] = await Promise.all([startTestGateway(), startTestGateway({ env: { MAX_REPEATED_FIELDS: '1000' } })]);
});

afterAll(() => Promise.all([t.close(), roomy.close()]));
beforeEach(() => {
  t.reset();
  roomy.reset();
  vi.restoreAllMocks();
});

describe('plans cached per document', () => {
  it('the same document with other ids is bound again, not analysed again; directive variables key the analysis', () => {
    const analyses = vi.spyOn(SelectionAnalysis.prototype, 'rootFields');
    const planner = new Planner({ schema, strategy: 'selection' });
    const document = parse(
      `query($id: ID!, $meta: Boolean!) { head(id: $id) { name headMetadata @include(if: $meta) } }`,
    );
    const ids = ['6a3c5a2e-7d1f-4c8e-9b0a-1f2e3d4c5b6a', '7b4d6b3f-8e2a-4d9f-8c1b-2a3f4e5d6c7b'];
    const plan = (id: string, meta: boolean) => planner.plan({ document, variables: { id, meta }, authorized: false });

    expect(plan(ids[0]!, true).reads).toEqual([{ operation: 'getHeadExtById', params: { id: ids[0] } }]);
    expect(plan(ids[1]!, true).reads).toEqual([{ operation: 'getHeadExtById', params: { id: ids[1] } }]);
    expect(analyses).toHaveBeenCalledTimes(1);
    expect(plan(ids[1]!, false).reads).toEqual([{ operation: 'getHeadById', params: { id: ids[1] } }]);
    expect(plan(ids[0]!, true).calls).toBe(1);
    expect(analyses).toHaveBeenCalledTimes(2);
  });

  it('a document whose planned arguments read no variable is bound once: the same plan for every request', () => {
    const planner = new Planner({ schema, strategy: 'selection' });
    const document = parse(
      `{ head(id: "6a3c5a2e-7d1f-4c8e-9b0a-1f2e3d4c5b6a") { name } heads(first: 5) { nodes { headMetadata } } }`,
    );
    const first = planner.plan({ document, authorized: false });
    expect(first.calls).toBe(2);
    expect(planner.plan({ document, authorized: false })).toBe(first);
    expect(planner.plan({ document, authorized: true })).not.toBe(first);
  });

  it('through the gateway: the same query text twice is analysed once (prepared once)', async () => {
    const analyses = vi.spyOn(SelectionAnalysis.prototype, 'rootFields');
    const query = `query Cached($id: ID!) { head(id: $id) { name hair { name } } }`;
    const ids = t.reference.store.headIds();
    for (const id of ids.slice(0, 3)) expect((await t.execute(query, { id })).errors).toBeUndefined();
    expect(analyses).toHaveBeenCalledTimes(1);
    expect(t.calls()).toHaveLength(3);
  });
});

describe('planning is linear in the document', () => {
  /**
   * The document parsed, each selection set counting how often its `selections` are read: a walk
   * of any kind reads them, so the count is the planner's work in selection sets, whatever the
   * walk looks like (the analysis, the item count, the variables check).
   */
  function instrumented(query: string) {
    let reads = 0;
    let sets = 0;
    const document = visit(parse(query), {
      SelectionSet(node) {
        sets++;
        const { selections } = node;
        Object.defineProperty(node, 'selections', {
          enumerable: true,
          get: () => {
            reads++;
            return selections;
          },
        });
      },
    });
    // visit itself read each once, after its visitor made it count.
    const visited = reads;
    return { document, sets, reads: () => reads - visited };
  }

  /** How often the planner reads each selection set of `query`, on average, and the plan. */
  function planningWork(query: string) {
    const { document, sets, reads } = instrumented(query);
    const plan = new Planner({ schema, strategy: 'selection' }).plan({ document, authorized: false });
    return { readsPerSet: reads() / sets, plan };
  }

  it('by default the crafted document is refused before validation (one field 20 times in one selection), with zero calls', async () => {
    const response = await t.execute(fanOut());
    expect(response.errors).toEqual([
      {
        message: 'Field "heads" appears 20 times in one selection; the limit is 10.',
        extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit: 'repeats' },
      },
    ]);
    expect(t.calls()).toEqual([]);
  });

  it('the crafted document costs the planner what a plain one does: each selection set read a couple of times, never once per path', () => {
    const length = fanOut().length;
    expect(length).toBe(5_521);
    const craftedWork = planningWork(fanOut());
    const plainWork = planningWork(plainOfLength(length));
    // A fragment walk per path (the old estimate, or the analysis without its memo) reads fragment
    // H's selection set again for each of the 20 × 190 × 100 paths that reach it: 2,446 reads a
    // selection set on average.
    expect(craftedWork.readsPerSet).toBeLessThanOrEqual(3);
    expect(plainWork.readsPerSet).toBeLessThanOrEqual(3);
    // The crafted document's 20 `heads(first: 1)` are one field: one listing.
    expect(craftedWork.plan).toMatchObject({ calls: 1, exact: true });
  });

  it('allowed to repeat fields, the crafted document is answered with one upstream read per operation', async () => {
    const post = async (query: string) =>
      (
        await roomy.gateway.fetch('http://gateway/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query }),
        })
      ).json() as Promise<{ errors?: unknown }>;
    expect((await post(fanOut())).errors).toBeUndefined();
    expect((await post(plainOfLength(fanOut().length))).errors).toBeUndefined();
    // Each operation read its one page once.
    expect(roomy.calls().map((r) => [r.operation, r.query])).toEqual(
      Array.from({ length: 2 }, () => ['listHeads', { page: '1', size: '1' }]),
    );
  });
});
