import {
  type FieldNode,
  type FragmentDefinitionNode,
  type FragmentSpreadNode,
  type GraphQLField,
  GraphQLIncludeDirective,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  GraphQLSkipDirective,
  getDirectiveValues,
  getNamedType,
  type InlineFragmentNode,
  isAbstractType,
  isObjectType,
  Kind,
  type SelectionSetNode,
  typeFromAST,
} from 'graphql';
import type { Needs } from '../domain/needs.js';
import { factsOf } from './facts.js';

/*
 * What a selection needs, read from the document with graphql-js's field collection rules:
 * `@skip`/`@include` honoured, fragments applied only where their type condition matches, and
 * each (selection set, type) pair analysed once, so the cost is linear in the document: a
 * fragment spread a thousand times is read once.
 */

/** The needs of a selection: those of its initial payload, and those of its deferred parts. */
export interface SelectionNeeds {
  readonly now: Needs;
  readonly deferred: Needs;
}

const NOTHING: SelectionNeeds = { now: 0, deferred: 0 };

/** A root field as execution will see it: every node under one response key. */
export interface RootField {
  readonly responseKey: string;
  readonly definition: GraphQLField<unknown, unknown>;
  readonly nodes: readonly FieldNode[];
  /** The union of what all its nodes' selections need. */
  readonly needs: SelectionNeeds;
}

/**
 * Reads selections as execution will: `@skip`/`@include` for these variables, fragments where their type condition
 * matches.
 */
export class FieldCollector {
  protected readonly schema: GraphQLSchema;
  protected readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  protected readonly variables: Readonly<Record<string, unknown>>;

  constructor(
    schema: GraphQLSchema,
    fragments: ReadonlyMap<string, FragmentDefinitionNode>,
    variables: Readonly<Record<string, unknown>>,
  ) {
    this.schema = schema;
    this.fragments = fragments;
    this.variables = variables;
  }

  /**
   * The fields a selection set answers on `type`, by response key (graphql-js's CollectFields); each named fragment
   * once.
   */
  collect(
    type: GraphQLObjectType,
    selectionSet: SelectionSetNode,
    into: Map<string, FieldNode[]>,
    visited: Set<string>,
  ): void {
    for (const selection of selectionSet.selections) {
      if (!this.included(selection)) continue;
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const nodes = into.get(key);
        if (nodes) nodes.push(selection);
        else into.set(key, [selection]);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (this.applies(selection, type)) this.collect(type, selection.selectionSet, into, visited);
      } else if (!visited.has(selection.name.value)) {
        visited.add(selection.name.value);
        const fragment = this.fragments.get(selection.name.value);
        if (fragment && this.applies(fragment, type)) this.collect(type, fragment.selectionSet, into, visited);
      }
    }
  }

  /** `@skip`/`@include`, as execution reads them. */
  protected included(node: { readonly directives?: FieldNode['directives'] }): boolean {
    if (node.directives === undefined || node.directives.length === 0) return true;
    if (getDirectiveValues(GraphQLSkipDirective, node, this.variables)?.if === true) return false;
    return getDirectiveValues(GraphQLIncludeDirective, node, this.variables)?.if !== false;
  }

  /** Whether a fragment's type condition matches the object type (graphql-js semantics). */
  protected applies(fragment: InlineFragmentNode | FragmentDefinitionNode, type: GraphQLObjectType): boolean {
    if (fragment.typeCondition === undefined) return true;
    const condition = typeFromAST(this.schema, fragment.typeCondition);
    if (condition === type) return true;
    return condition !== undefined && isAbstractType(condition) && this.schema.isSubType(condition, type);
  }
}

export class SelectionAnalysis extends FieldCollector {
  readonly #memo = new WeakMap<SelectionSetNode, Map<string, SelectionNeeds>>();

  /** The root fields of an operation, by response key, as graphql-js collects them. */
  rootFields(type: GraphQLObjectType, selectionSet: SelectionSetNode): RootField[] {
    const collected = new Map<string, FieldNode[]>();
    this.collect(type, selectionSet, collected, new Set());
    const fields: RootField[] = [];
    for (const [responseKey, nodes] of collected) {
      const definition = type.getFields()[nodes[0]!.name.value];
      if (definition === undefined) continue; // __typename, __schema, __type
      let now = 0;
      let deferred = 0;
      for (const node of nodes) {
        const needs = node.selectionSet ? this.#ofField(definition.type, node.selectionSet) : NOTHING;
        now |= needs.now;
        deferred |= needs.deferred;
      }
      fields.push({ responseKey, definition, nodes, needs: { now, deferred } });
    }
    return fields;
  }

  /** What a field's selection needs, over every object type its type can be. */
  #ofField(fieldType: GraphQLOutputType, selectionSet: SelectionSetNode): SelectionNeeds {
    const named = getNamedType(fieldType);
    if (isObjectType(named)) return this.#ofSelection(named, selectionSet);
    if (!isAbstractType(named)) return NOTHING;
    let now = 0;
    let deferred = 0;
    for (const possible of this.schema.getPossibleTypes(named)) {
      const needs = this.#ofSelection(possible, selectionSet);
      now |= needs.now;
      deferred |= needs.deferred;
    }
    return { now, deferred };
  }

  /**
   * What a selection set needs on `type`: the needs its fields declare, OR-ed with those of their
   * own selections (a hair's variant fields are its head's needs). A deferred fragment's needs
   * go to `deferred`.
   */
  #ofSelection(type: GraphQLObjectType, selectionSet: SelectionSetNode): SelectionNeeds {
    let byType = this.#memo.get(selectionSet);
    const known = byType?.get(type.name);
    if (known) return known;
    if (byType === undefined) {
      byType = new Map();
      this.#memo.set(selectionSet, byType);
    }
    // A fragment cycle (refused by validation) would stop here instead of looping.
    byType.set(type.name, NOTHING);

    let now = 0;
    let deferred = 0;
    for (const selection of selectionSet.selections) {
      if (!this.included(selection)) continue;
      if (selection.kind === Kind.FIELD) {
        const field = type.getFields()[selection.name.value];
        if (field === undefined) continue; // __typename
        now |= factsOf(field).needs ?? 0;
        if (selection.selectionSet) {
          const needs = this.#ofField(field.type, selection.selectionSet);
          now |= needs.now;
          deferred |= needs.deferred;
        }
        continue;
      }
      const fragment = selection.kind === Kind.INLINE_FRAGMENT ? selection : this.fragments.get(selection.name.value);
      if (fragment === undefined || !this.applies(fragment, type)) continue;
      const needs = this.#ofSelection(type, fragment.selectionSet);
      if (this.#deferred(selection)) deferred |= needs.now | needs.deferred;
      else {
        now |= needs.now;
        deferred |= needs.deferred;
      }
    }
    const result = { now, deferred };
    byType.set(type.name, result);
    return result;
  }

  /** A fragment under `@defer` (unless `if: false`), when the schema has the directive. */
  #deferred(node: InlineFragmentNode | FragmentSpreadNode): boolean {
    if (node.directives === undefined || node.directives.length === 0) return false;
    const defer = this.schema.getDirective('defer');
    if (defer === undefined || defer === null) return false;
    const values = getDirectiveValues(defer, node, this.variables);
    return values !== undefined && values.if !== false;
  }
}
