import {
  type FieldNode,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLObjectType,
  type GraphQLSchema,
  getArgumentValues,
  getNamedType,
  getNullableType,
  isAbstractType,
  isCompositeType,
  isListType,
  isObjectType,
} from 'graphql';
import { FieldCollector, type RootField } from './analyze.js';
import { factsOf } from './facts.js';

/*
 * How many list entries an operation can answer, read from the document before execution, for
 * the result items limit: each list field's length (its `items` fact: a list argument's length,
 * or the window of its connection) times the lists around it, summed over the response keys.
 * Fields merged under one response key are one list, as execution merges them (two fragments
 * both selecting a connection's `edges` answer its items once). Only the types that can hold a
 * list are walked: the count of a page of heads reads the connection's level and stops there.
 */

/** Per schema, whether a type's selections can answer a list anywhere below it. */
const listHolders = new WeakMap<GraphQLSchema, Map<string, boolean>>();

function holdsList(schema: GraphQLSchema, type: GraphQLNamedType): boolean {
  let known = listHolders.get(schema);
  if (known === undefined) {
    known = new Map();
    listHolders.set(schema, known);
  }
  const cached = known.get(type.name);
  if (cached !== undefined) return cached;
  // A type that reaches itself holds a list only if something else on the way does.
  known.set(type.name, false);
  const types = isAbstractType(type) ? schema.getPossibleTypes(type) : isObjectType(type) ? [type] : [];
  const holds = types.some((object) =>
    Object.values(object.getFields()).some(
      (field) => isListType(getNullableType(field.type)) || holdsList(schema, getNamedType(field.type)),
    ),
  );
  known.set(type.name, holds);
  return holds;
}

export class ItemCount extends FieldCollector {
  /**
   * The entries a root field answers; `window` is its connection's size when it is one (the
   * `last` of a window counted from the end).
   */
  ofRoot(root: RootField, window: number | undefined): number {
    return this.#ofField(root.definition, root.nodes, window);
  }

  #ofField(field: GraphQLField<unknown, unknown>, nodes: readonly FieldNode[], window: number | undefined): number {
    const inner = this.#below(getNamedType(field.type), nodes, window);
    if (!isListType(getNullableType(field.type))) return inner;
    return this.#length(field, nodes[0]!, window) * (1 + inner);
  }

  /** Entries answered below one value of `type` (each element of a list, counted once). */
  #below(type: GraphQLNamedType, nodes: readonly FieldNode[], window: number | undefined): number {
    if (!isCompositeType(type) || !holdsList(this.schema, type)) return 0;
    const objects: readonly GraphQLObjectType[] = isAbstractType(type)
      ? this.schema.getPossibleTypes(type)
      : [type as GraphQLObjectType];
    let most = 0;
    for (const object of objects) {
      const collected = new Map<string, FieldNode[]>();
      const visited = new Set<string>();
      for (const node of nodes) if (node.selectionSet) this.collect(object, node.selectionSet, collected, visited);
      let count = 0;
      for (const fieldNodes of collected.values()) {
        const field = object.getFields()[fieldNodes[0]!.name.value];
        if (field !== undefined) count += this.#ofField(field, fieldNodes, window);
      }
      most = Math.max(most, count);
    }
    return most;
  }

  /** A list's length as its field declares it; a list that declares none counts as one entry. */
  #length(field: GraphQLField<unknown, unknown>, node: FieldNode, window: number | undefined): number {
    const fact = factsOf(field).items;
    if (fact === 'window') return window ?? 1;
    if (fact === undefined) return 1;
    try {
      const value = getArgumentValues(field, node, this.variables)[fact.arg];
      return Array.isArray(value) ? value.length : 1;
    } catch {
      return 0; // execution refuses the field the same way, and answers no entry
    }
  }
}
