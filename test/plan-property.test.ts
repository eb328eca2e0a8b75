import { encodeGlobalID, offsetToCursor } from '@pothos/plugin-relay';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { planOf } from './support/plan.js';

/*
 * Property: for generated operations over head, heads, node and nodes (aliases, named and inline
 * fragments, @include/@skip with literals and variables), the calls the gateway makes, the
 * count of its plan, and the lower bound an independent oracle works out from the contract's
 * endpoint table are one and the same number; and the plan's count of list entries (the items
 * limit) is what the answer holds when its windows are full.
 *
 * The oracle knows the contract, not the data: before execution nobody knows which heads a page
 * holds or whether a head has a hair, so a head named by id costs its own reads even when a
 * listing of the same operation turns out to hold it.
 */

const RUNS = Number(process.env.PLAN_PROPERTY_RUNS ?? 2_000);
const SEED = Number(process.env.PLAN_PROPERTY_SEED ?? 20_261_122);

// ---- the contract's endpoint table, as the oracle reads it (contract 2.1-2.4, 4.4-4.9) ----
/** Fields only variant A reads carry: Get Head Ext By Id (A), Get Heads. */
const headAOnly = new Set(['updatedAt', 'arUrl']);
const hairAOnly = new Set(['gender', 'sourceType', 'objMetadata', 'updatedAt']);
/** Fields only variant B reads carry: Get Head (Ext) By Id, Get Heads Ext. */
const hairBOnly = new Set(['hairMetadata', 'userId']);
/** Only the extended reads carry head_metadata: Get Head Ext By Id (A or B), Get Heads Ext. */
const extendedOnly = new Set(['headMetadata']);

interface Needs {
  a: boolean;
  b: boolean;
  meta: boolean;
}
const none = (): Needs => ({ a: false, b: false, meta: false });
const merge = (into: Needs, from: Needs) => {
  into.a ||= from.a;
  into.b ||= from.b;
  into.meta ||= from.meta;
};

/**
 * One head by id: variant A fields need Get Head Ext By Id (A), which has head_metadata; Hair B one more read. Anything
 * else: one read.
 */
const byIdLowerBound = (n: Needs) => (n.a && n.b ? 2 : 1);

/** Get Heads pages of size 1..100: one call if some page size holds [offset, offset+n), else two. */
function pageCallsLowerBound(offset: number, n: number): number {
  for (let size = n; size <= 100; size++) if ((offset % size) + n <= size) return 1;
  return 2;
}

/**
 * One window of the listing: Get Heads pages carry variant A and the total; Get Heads Ext (one
 * call for any window, one row more for hasNextPage) carries head_metadata and Hair B but no total.
 */
function listingLowerBound(offset: number, n: number, items: Needs, total: boolean): number {
  if (!(items.meta || items.b)) return pageCallsLowerBound(offset, n);
  if (items.a) return 1 + pageCallsLowerBound(offset, n);
  return 1 + (total ? 1 : 0);
}

// ---- the operation model ----
type Wrap = 'plain' | 'inline' | 'fragment' | 'include' | 'excluded' | 'skipFalse' | 'skipTrue' | 'variable';
interface Item {
  readonly field: string;
  readonly wrap: Wrap;
  readonly hair?: readonly Item[];
}
type IdRef = { readonly head: number; readonly form: 'global' | 'raw' | 'variable' } | { readonly other: true };
type Root =
  | { readonly kind: 'head' | 'node'; readonly id: IdRef; readonly items: readonly Item[]; readonly wrap: Wrap }
  | { readonly kind: 'nodes'; readonly ids: readonly IdRef[]; readonly items: readonly Item[]; readonly wrap: Wrap }
  | {
      readonly kind: 'heads';
      readonly items: readonly Item[];
      readonly shape: 'nodes' | 'edges' | 'both';
      readonly total: boolean;
      readonly pageInfo: boolean;
      readonly wrap: Wrap;
    };
interface Operation {
  readonly roots: readonly Root[];
  readonly first: number;
  readonly after: number | undefined;
  readonly flag: boolean;
}

const wrap = fc.constantFrom<Wrap>(
  'plain',
  'plain',
  'plain',
  'inline',
  'fragment',
  'include',
  'excluded',
  'skipFalse',
  'skipTrue',
  'variable',
);
const hairItem = fc.record({
  field: fc.constantFrom(
    'name',
    'id',
    'url',
    'style',
    'gender',
    'sourceType',
    'objMetadata',
    'updatedAt',
    'hairMetadata',
    'userId',
    '__typename',
  ),
  wrap,
});
const headItem: fc.Arbitrary<Item> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      field: fc.constantFrom(
        'name',
        'uuid',
        'id',
        'url',
        'createdAt',
        'updatedAt',
        'arUrl',
        'headMetadata',
        'outputFormat',
        '__typename',
      ),
      wrap,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      field: fc.constant('hair'),
      wrap,
      hair: fc.array(hairItem, { minLength: 1, maxLength: 4 }),
    }),
  },
);
const items = fc.array(headItem, { minLength: 1, maxLength: 5 });
const idRef: fc.Arbitrary<IdRef> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      head: fc.integer({ min: 0, max: 5 }),
      form: fc.constantFrom('global' as const, 'raw' as const, 'variable' as const),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ other: true as const }) },
);
const root: fc.Arbitrary<Root> = fc.oneof(
  fc.record({ kind: fc.constant('head' as const), id: idRef.filter((r) => !('other' in r)), items, wrap }),
  fc.record({ kind: fc.constant('node' as const), id: idRef, items, wrap }),
  fc.record({ kind: fc.constant('nodes' as const), ids: fc.array(idRef, { minLength: 1, maxLength: 5 }), items, wrap }),
  fc.record({
    kind: fc.constant('heads' as const),
    items,
    shape: fc.constantFrom('nodes' as const, 'edges' as const, 'both' as const),
    total: fc.boolean(),
    pageInfo: fc.boolean(),
    wrap,
  }),
);
const operation: fc.Arbitrary<Operation> = fc.record({
  roots: fc.array(root, { minLength: 1, maxLength: 4 }),
  first: fc.constantFrom(1, 3, 10, 20, 50, 100),
  after: fc.option(fc.constantFrom(0, 4, 45, 99, 150, 255), { nil: undefined }),
  flag: fc.boolean(),
});

/** Whether an item under this wrap is part of the operation, `$flag` being `flag`. */
const included = (w: Wrap, flag: boolean) => w !== 'excluded' && w !== 'skipTrue' && (w !== 'variable' || flag);

function needsOf(list: readonly Item[], flag: boolean, onHair = false): Needs {
  const needs = none();
  for (const item of list) {
    if (!included(item.wrap, flag)) continue;
    if (item.hair) merge(needs, needsOf(item.hair, flag, true));
    else if (onHair) {
      needs.a ||= hairAOnly.has(item.field);
      needs.b ||= hairBOnly.has(item.field);
    } else {
      needs.a ||= headAOnly.has(item.field);
      needs.meta ||= extendedOnly.has(item.field);
    }
  }
  return needs;
}

/** The oracle: the fewest calls the contract allows for this operation. */
function lowerBound(op: Operation, ids: readonly string[]): number {
  const byId = new Map<string, Needs>();
  const listing = none();
  let listed = false;
  let total = false;
  for (const r of op.roots) {
    if (!included(r.wrap, op.flag)) continue;
    const needs = needsOf(r.items, op.flag);
    if (r.kind === 'heads') {
      listed = true;
      total ||= r.total;
      merge(listing, needs);
      continue;
    }
    for (const ref of r.kind === 'nodes' ? r.ids : [r.id]) {
      if ('other' in ref) continue;
      const id = ids[ref.head]!;
      const known = byId.get(id) ?? none();
      merge(known, needs);
      byId.set(id, known);
    }
  }
  let calls = 0;
  for (const needs of byId.values()) calls += byIdLowerBound(needs);
  if (listed) calls += listingLowerBound(op.after === undefined ? 0 : op.after + 1, op.first, listing, total);
  return calls;
}

/** The oracle of the items limit: the list entries an answer holds with a full window, `nodes(ids:)` one per id. */
function itemsBound(op: Operation): number {
  let items = 0;
  for (const r of op.roots) {
    if (!included(r.wrap, op.flag)) continue;
    if (r.kind === 'nodes') items += r.ids.length;
    if (r.kind === 'heads') items += op.first * (r.shape === 'both' ? 2 : 1);
  }
  return items;
}

/** List entries an answer holds, at any depth. */
const entriesOf = (value: unknown): number =>
  Array.isArray(value)
    ? value.length + value.reduce((sum: number, entry) => sum + entriesOf(entry), 0)
    : value !== null && typeof value === 'object'
      ? Object.values(value).reduce((sum: number, entry) => sum + entriesOf(entry), 0)
      : 0;

// ---- rendering the model as a GraphQL document ----
function render(op: Operation, ids: readonly string[]): { query: string; variables: Record<string, unknown> } {
  const fragments: string[] = [];
  const variables: Record<string, unknown> = {};
  const declarations: string[] = [];
  const declare = (name: string, type: string, value: unknown) => {
    if (!(name in variables)) declarations.push(`$${name}: ${type}`);
    variables[name] = value;
  };
  const wrapped = (w: Wrap, onType: string, body: string): string => {
    switch (w) {
      case 'plain':
        return body;
      case 'inline':
        return `... on ${onType} { ${body} }`;
      case 'fragment': {
        const name = `F${fragments.length}`;
        fragments.push(`fragment ${name} on ${onType} { ${body} }`);
        return `...${name}`;
      }
      case 'include':
        return `... @include(if: true) { ${body} }`;
      case 'excluded':
        return `... @include(if: false) { ${body} }`;
      case 'skipFalse':
        return `... @skip(if: false) { ${body} }`;
      case 'skipTrue':
        return `... @skip(if: true) { ${body} }`;
      case 'variable':
        declare('flag', 'Boolean!', op.flag);
        return `... @include(if: $flag) { ${body} }`;
    }
  };
  const selection = (list: readonly Item[], onType: string): string =>
    list
      .map((item) => wrapped(item.wrap, onType, item.hair ? `hair { ${selection(item.hair, 'Hair')} }` : item.field))
      .join(' ');
  const idValue = (ref: IdRef, n: number): string => {
    if ('other' in ref) return JSON.stringify(encodeGlobalID('Permission', '00000000-0000-4000-8000-000000000001'));
    const id = ids[ref.head]!;
    if (ref.form === 'raw') return JSON.stringify(id);
    if (ref.form === 'global') return JSON.stringify(encodeGlobalID('Head', id));
    declare(`id${n}`, 'ID!', encodeGlobalID('Head', id));
    return `$id${n}`;
  };
  const window = `first: ${op.first}${op.after === undefined ? '' : `, after: ${JSON.stringify(offsetToCursor(op.after))}`}`;
  let n = 0;
  const roots = op.roots.map((r, i) => {
    const alias = `r${i}`;
    const heads = selection(r.items, 'Head');
    let field: string;
    if (r.kind === 'head') field = `${alias}: head(id: ${idValue(r.id, n++)}) { ${heads} }`;
    else if (r.kind === 'node') field = `${alias}: node(id: ${idValue(r.id, n++)}) { id ... on Head { ${heads} } }`;
    else if (r.kind === 'nodes')
      field = `${alias}: nodes(ids: [${r.ids.map((ref) => idValue(ref, n++)).join(', ')}]) { ... on Head { ${heads} } }`;
    else if (r.kind === 'heads') {
      const parts = [
        r.shape !== 'edges' ? `nodes { ${heads} }` : '',
        r.shape !== 'nodes' ? `edges { cursor node { ${heads} } }` : '',
        r.total ? 'totalCount' : '',
        r.pageInfo ? 'pageInfo { hasNextPage endCursor }' : '',
      ];
      field = `${alias}: heads(${window}) { ${parts.join(' ')} }`;
    } else throw new Error('unknown root');
    return wrapped(r.wrap, 'Query', field);
  });
  const query = `query Generated${declarations.length ? `(${declarations.join(', ')})` : ''} { ${roots.join(' ')} } ${fragments.join(' ')}`;
  return { query, variables };
}

let t: TestGateway;
let ids: string[];
let operations = 0;
let listingSize: number;

beforeAll(async () => {
  // Generated documents carry many directives; the limits are not what this test is about.
  t = await startTestGateway({ env: { MAX_DIRECTIVES: '500', MAX_TOKENS: '10000' } });
  ids = t.reference.store.headIds().slice(0, 6);
  listingSize = t.reference.store.headIds().length;
});

afterAll(() => t.close());

describe('the plan of generated operations', () => {
  it(`calls made = the plan's count = the contract's lower bound, and the plan's items = what a full answer holds, for ${RUNS} operations (seed ${SEED})`, async () => {
    await fc.assert(
      fc.asyncProperty(operation, async (op) => {
        const { query, variables } = render(op, ids);
        // Counted by request id, right after the answer: an operation answers once its reads are in.
        const requestId = `property-${++operations}`;
        t.reset();
        const response = await t.execute(query, variables, { 'x-request-id': requestId });
        expect(response.errors, query).toBeUndefined();
        // A GET retried after a connection reset (a keep-alive race on a loaded machine) is one call twice.
        const retries = t.attempts.filter((attempt) => attempt.retry).length;
        const made = t.calls().filter((r) => r.headers['x-request-id'] === requestId).length - retries;
        const plan = planOf(query, variables);
        const bound = lowerBound(op, ids);
        expect({ made, planned: plan.calls, exact: plan.exact }, query).toEqual({
          made: bound,
          planned: bound,
          exact: true,
        });
        // The items limit's count: what the answer holds when every window is full, never less than it holds.
        const answered = entriesOf(response.data);
        expect(plan.items, query).toBe(itemsBound(op));
        if ((op.after ?? -1) + 1 + op.first <= listingSize) expect(answered, query).toBe(plan.items);
        else expect(answered, query).toBeLessThanOrEqual(plan.items);
      }),
      { numRuns: RUNS, seed: SEED },
    );
  }, 600_000);
});
