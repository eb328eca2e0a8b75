import {
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  getArgumentValues,
  getOperationAST,
  getVariableValues,
  Kind,
  type OperationDefinitionNode,
  visit,
} from 'graphql';
import { LRUCache } from 'lru-cache';
import { entityIdsFrom, headIdFrom, MAX_NODE_IDS, nodeHeadIdFrom } from '../domain/ids.js';
import { carries, Need, type Strategy } from '../domain/needs.js';
import { connectionArgsSchema } from '../domain/pages.js';
import { type RootField, SelectionAnalysis, type SelectionNeeds } from './analyze.js';
import { factsOf, type RootFact } from './facts.js';
import { ItemCount } from './items.js';
import { type HeadListing, type HeadListingPlan, planHeadListing, planPagedListing } from './listings.js';
import { carriedBy, type HeadReads, headReads, type PlannedRead, ReadList } from './reads.js';
import { type ConnectionArgs, connectionWindow, windowSize } from './windows.js';

/*
 * One upstream plan per operation: which reads and calls it makes, worked out once from the
 * validated document and the variables, before execution. The budget checks its count, the
 * resolvers take their reads from it, and tests compare it with what the upstream saw.
 */

/**
 * A head the operation names by id: the reads of its initial payload, and those of its deferred fields, started beside
 * them.
 */
export interface PlannedHead {
  readonly now: HeadReads;
  readonly deferred: HeadReads;
}

/** What the plan says about the head an `updateHead` answers: the reads its payload's fields need after it. */
export interface HeadUpdatePlan {
  readonly kind: 'headUpdate';
  readonly after: HeadReads;
}

export type FieldPlan = HeadListingPlan | HeadUpdatePlan;

export interface OperationPlan {
  /** Per head the operation names by id: its reads, for the initial payload and for deferred fields. */
  readonly heads: ReadonlyMap<string, PlannedHead>;
  /** Per root field (response key), what its resolver needs to know. */
  readonly fields: ReadonlyMap<string, FieldPlan>;
  /** Every upstream call, in no particular order; reads of the same route and parameters once. */
  readonly reads: readonly PlannedRead[];
  readonly calls: number;
  /** False when some calls depend on data (`estimated` reads): `calls` is then an upper bound. */
  readonly exact: boolean;
  /** List entries the answer can hold at most (plan/items.ts), for the result items limit. */
  readonly items: number;
}

/** The plan of an operation that plans nothing (or of execution without the planner's plugin). */
export const EMPTY_PLAN: OperationPlan = Object.freeze({
  heads: new Map(),
  fields: new Map(),
  reads: [],
  calls: 0,
  exact: true,
  items: 0,
});

/** The root fields of one operation with their needs: everything but the variables' values. */
interface OperationShape {
  readonly operation: OperationDefinitionNode;
  /** Every root field, with its upstream fact if it has one. */
  readonly fields: readonly { readonly root: RootField; readonly fact: RootFact | undefined }[];
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  /** No field argument reads a variable: the plan is the same for every request (with a token, and without). */
  readonly constant: boolean;
  readonly bound: { authorized?: OperationPlan; anonymous?: OperationPlan };
}

/** What is kept per document: its fragments, the variables directives read, its shapes. */
interface DocumentPlans {
  readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  /** Variables read by directives (`@skip(if: $x)`): they change the shape, so they key it. */
  readonly directiveVariables: readonly string[];
  /** Whether any field argument reads a variable: then the plan is bound per request. */
  readonly argumentVariables: boolean;
  readonly shapes: LRUCache<string, OperationShape | 'none'>;
}

export interface PlannerOptions {
  readonly schema: GraphQLSchema;
  readonly strategy: Strategy;
}

/** Shapes kept per document: one per operation name and values of its directive variables. */
const SHAPES_PER_DOCUMENT = 16;

export interface PlanRequest {
  readonly document: DocumentNode;
  readonly operationName?: string | null | undefined;
  readonly variables?: Readonly<Record<string, unknown>> | null | undefined;
  /** Whether the request carries a token: calls that need one are not made without it. */
  readonly authorized: boolean;
}

/**
 * Plans operations. Documents come from the gateway's prepared documents, so the same text is the
 * same DocumentNode: what is derived from one is kept in a WeakMap beside them,
 * bounded by it, and a hot operation costs its variables' binding, never a selection analysis.
 */
export class Planner {
  readonly #schema: GraphQLSchema;
  readonly strategy: Strategy;
  readonly #documents = new WeakMap<DocumentNode, DocumentPlans>();

  constructor(options: PlannerOptions) {
    this.#schema = options.schema;
    this.strategy = options.strategy;
  }

  plan(request: PlanRequest): OperationPlan {
    const plans = this.#documentPlans(request.document);
    const operation = getOperationAST(request.document, request.operationName);
    if (operation === null || operation === undefined) return EMPTY_PLAN;
    // Variables as execution will see them; if they do not coerce, execution refuses the operation.
    const coerced = getVariableValues(this.#schema, operation.variableDefinitions ?? [], request.variables ?? {});
    if (coerced.errors) return EMPTY_PLAN;
    const variables = coerced.coerced;
    const shapeKey = `${operation.name?.value ?? ''}\n${plans.directiveVariables.map((name) => JSON.stringify(variables[name])).join(',')}`;
    let shape = plans.shapes.get(shapeKey);
    if (shape === undefined) {
      shape = this.#shape(operation, plans, variables);
      plans.shapes.set(shapeKey, shape);
    }
    if (shape === 'none') return EMPTY_PLAN;
    if (!shape.constant) return bind(shape, variables, request.authorized, this.strategy, this.#schema);
    const key = request.authorized ? 'authorized' : 'anonymous';
    shape.bound[key] ??= bind(shape, variables, request.authorized, this.strategy, this.#schema);
    return shape.bound[key];
  }

  #documentPlans(document: DocumentNode): DocumentPlans {
    let plans = this.#documents.get(document);
    if (plans === undefined) {
      const fragments = new Map<string, FragmentDefinitionNode>();
      const directiveVariables = new Set<string>();
      let argumentVariables = false;
      for (const definition of document.definitions)
        if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
      visit(document, {
        Directive: (directive) => {
          visit(directive, { Variable: (variable) => void directiveVariables.add(variable.name.value) });
          return false;
        },
        Argument: (argument) => {
          visit(argument, {
            Variable: () => {
              argumentVariables = true;
            },
          });
          return false;
        },
      });
      plans = {
        fragments,
        directiveVariables: [...directiveVariables],
        argumentVariables,
        shapes: new LRUCache({ max: SHAPES_PER_DOCUMENT }),
      };
      this.#documents.set(document, plans);
    }
    return plans;
  }

  #shape(
    operation: OperationDefinitionNode,
    plans: DocumentPlans,
    variables: Readonly<Record<string, unknown>>,
  ): OperationShape | 'none' {
    const type = this.#schema.getRootType(operation.operation);
    if (type === undefined || type === null) return 'none';
    const fields = new SelectionAnalysis(this.#schema, plans.fragments, variables)
      .rootFields(type, operation.selectionSet)
      .map((root) => ({ root, fact: factsOf(root.definition).plan }));
    if (fields.length === 0) return 'none';
    return { operation, fields, fragments: plans.fragments, constant: !plans.argumentVariables, bound: {} };
  }
}

/** The plan of one shape for these variables: ids, windows and the reads they make. */
function bind(
  shape: OperationShape,
  variables: Readonly<Record<string, unknown>>,
  authorized: boolean,
  strategy: Strategy,
  schema: GraphQLSchema,
): OperationPlan {
  const counter = new ItemCount(schema, shape.fragments, variables);
  const heads = new Map<string, SelectionNeeds>();
  const fields = new Map<string, FieldPlan>();
  const reads = new ReadList();
  const listings = new Map<string, HeadListing & { fields: string[] }>();
  let items = 0;
  const nameHead = (id: string | undefined, needs: SelectionNeeds) => {
    if (id === undefined) return;
    const known = heads.get(id);
    heads.set(id, known ? { now: known.now | needs.now, deferred: known.deferred | needs.deferred } : needs);
  };

  for (const { root, fact } of shape.fields) {
    let args: Record<string, unknown>;
    try {
      args = getArgumentValues(root.definition, root.nodes[0]!, variables);
    } catch {
      continue; // execution refuses the field the same way, with no call
    }
    const listed = fact?.kind === 'headListing' || fact?.kind === 'permissionListing';
    // Arguments a listing refuses (first: 101, a forged cursor) make no call and answer no item.
    const window =
      listed && connectionArgsSchema.safeParse(args).success ? connectionWindow(args as ConnectionArgs) : undefined;
    const length = listed ? (window === undefined ? 0 : windowSize(window)) : undefined;
    if (length !== 0) items += counter.ofRoot(root, length);
    switch (fact?.kind) {
      case 'head':
        nameHead(fact.ids === 'head' ? headIdFrom(args[fact.arg]) : nodeHeadIdFrom(args[fact.arg]), root.needs);
        break;
      case 'heads': {
        const ids = args[fact.arg];
        if (Array.isArray(ids) && ids.length <= MAX_NODE_IDS)
          for (const id of ids) nameHead(nodeHeadIdFrom(id), root.needs);
        break;
      }
      case 'entities': {
        const ids = entityIdsFrom(args[fact.arg], fact.typename, fact.key);
        if (Array.isArray(ids)) for (const id of ids) nameHead(id, root.needs);
        break;
      }
      case 'headListing': {
        if (window === undefined) break;
        // Listings of the same window share their reads: their items' needs are merged first.
        const listing = {
          filter: {
            search: (args.search as string | null | undefined) ?? undefined,
            style: (args.style as string | null | undefined) ?? undefined,
          },
          window,
        };
        const key = JSON.stringify(listing);
        const group = listings.get(key);
        if (group) {
          group.needs |= root.needs.now;
          group.deferred |= root.needs.deferred;
          group.fields.push(root.responseKey);
        } else
          listings.set(key, {
            ...listing,
            needs: root.needs.now,
            deferred: root.needs.deferred,
            fields: [root.responseKey],
          });
        break;
      }
      case 'permissionListing':
        if (authorized && window !== undefined) planPagedListing('getPermissions', {}, window, root.needs.now, reads);
        break;
      case 'headUpdate': {
        const input = args.input as { id?: unknown } | undefined;
        const id = headIdFrom(input?.id);
        if (id === undefined) break;
        // The answer is a fresh Head A: what else its fields need is read after it, every time.
        const after = headReads(root.needs.now | root.needs.deferred, carries.updateHead, strategy);
        fields.set(root.responseKey, { kind: 'headUpdate', after });
        reads.append('updateHead', { id });
        for (const { read } of after.reads) reads.append(read, { id });
        break;
      }
      case 'call':
        if (authorized || !fact.needsToken) reads.append(fact.operation, {});
        break;
    }
  }

  for (const listing of listings.values()) {
    const plan = planHeadListing(listing, strategy, reads, listing.fields[0]!);
    for (const field of listing.fields) fields.set(field, plan);
  }
  const planned = new Map<string, PlannedHead>();
  for (const [id, needs] of heads) {
    const now = headReads(needs.now | Need.head, 0, strategy);
    const deferred = headReads(needs.deferred, carriedBy(now.reads), strategy);
    for (const { read } of [...now.reads, ...deferred.reads]) reads.add(read, { id });
    planned.set(id, { now, deferred });
  }
  return { heads: planned, fields, reads: reads.reads, calls: reads.reads.length, exact: reads.exact, items };
}

/** The plan of a `heads` connection field, by its response key. */
export function listingPlan(plan: OperationPlan, responseKey: string): HeadListingPlan | undefined {
  const field = plan.fields.get(responseKey);
  return field?.kind === 'headListing' ? field : undefined;
}

/** The plan of an `updateHead` field, by its response key. */
export function updatePlan(plan: OperationPlan, responseKey: string): HeadUpdatePlan | undefined {
  const field = plan.fields.get(responseKey);
  return field?.kind === 'headUpdate' ? field : undefined;
}
