import type { GraphQLField } from 'graphql';
import type { Needs } from '../domain/needs.js';
import type { OperationName } from '../domain/operations.js';

/*
 * Facts fields declare about themselves, on their Pothos definition (`extensions`), for the
 * planner (and the response cache) to read from the schema: no list of field names kept anywhere else.
 */

/** What a root field reads or sends upstream. */
export type RootFact =
  /** One head by the id in `arg`: `head(id:)` takes a head id, `node(id:)` any global ID. */
  | { readonly kind: 'head'; readonly arg: string; readonly ids: 'head' | 'node' }
  /** Heads by the global IDs in `arg`, in order (`nodes(ids:)`). */
  | { readonly kind: 'heads'; readonly arg: string }
  /** The entities of `typename` that a supergraph's representations in `arg` name by their `key` (`_entities`). */
  | { readonly kind: 'entities'; readonly arg: string; readonly typename: string; readonly key: string }
  /** The `heads` connection (Get Heads, or Get Heads Ext when the items need what it carries). */
  | { readonly kind: 'headListing' }
  /** The `permissions` connection (Get Permissions); needs a token. */
  | { readonly kind: 'permissionListing' }
  /** `updateHead`: one Update Head call, whose answer is the head the payload selects. */
  | { readonly kind: 'headUpdate' }
  /** A mutation that is one upstream call and answers no head. */
  | { readonly kind: 'call'; readonly operation: OperationName; readonly needsToken: boolean };

/**
 * How many entries a list field answers at most: as many as the list argument `arg` holds
 * (`nodes(ids:)`), or the window of the connection it belongs to (`edges`, `nodes`).
 */
export type ItemsFact = { readonly arg: string } | 'window';

/**
 * What a mutation changes beyond the objects it answers, which the response cache evicts for
 * every caller once it may have changed them: the head whose id (global ID or UUID) is the `id` of
 * the input argument `head`, every kept answer holding one of `types`, and, for each field of that
 * input given, every kept answer holding one of the types `given` names for it (a hair's colour,
 * changed through one head, is seen by every head wearing that hair).
 */
export interface ChangesFact {
  readonly head?: string;
  /** The field deletes that head: once it succeeded, its watchers are told it is gone. */
  readonly deletes?: true;
  readonly types?: readonly string[];
  readonly given?: Readonly<Record<string, readonly string[]>>;
}

export interface FieldFacts {
  /** A mutation's changes, for the response cache's evictions. */
  readonly changes?: ChangesFact;
  /** A root field's upstream reads or calls. */
  readonly plan?: RootFact;
  /** What this field needs of the head it belongs to (variant-only fields, head_metadata, totalCount). */
  readonly needs?: Needs;
  /** A list field's length, for the result items limit. */
  readonly items?: ItemsFact;
}

/** What an object type declares of itself: the field a supergraph references it by (its `@key`), if any. */
export interface TypeFacts {
  readonly entityKey?: string;
}

/** The facts of a type, as its definition declared them. */
export const typeFactsOf = (type: { readonly extensions: unknown }): TypeFacts => (type.extensions ?? {}) as TypeFacts;

/** `extensions` for an object type a supergraph may reference by `key` (an entity of the subgraph schema). */
export const entity = (key: string): Extensions => ({ extensions: { entityKey: key } satisfies TypeFacts });

/** The facts of a field, as its definition declared them. */
export const factsOf = (field: GraphQLField<unknown, unknown>): FieldFacts => field.extensions as FieldFacts;

type Extensions = { extensions: Record<string, unknown> };
const extensions = (facts: FieldFacts): Extensions => ({ extensions: { ...facts } });

/** `extensions` for a field that needs `bits` of its head. */
export const needs = (bits: Needs): Extensions => extensions({ needs: bits });

/** `extensions` for a root field with its upstream fact (and, for a mutation, what it changes). */
export const plan = (fact: RootFact, changes?: ChangesFact): Extensions =>
  extensions(changes === undefined ? { plan: fact } : { plan: fact, changes });

/** `extensions` for a list field with its length fact (a root field's upstream fact beside it, if any). */
export const items = (fact: ItemsFact, root?: RootFact): Extensions =>
  extensions(root === undefined ? { items: fact } : { items: fact, plan: root });
