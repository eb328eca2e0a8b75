import { Kind, parse, type StringValueNode } from 'graphql';
import type { SchemaChange } from './changes.js';

/*
 * What the subgraph SDL (schema.subgraph.graphql) promises a supergraph beyond the fields schema.graphql already
 * checks: the entities and the keys other subgraphs reference them by. Dropping a key breaks every subgraph that
 * references the entity by it, none of which this repository knows: such a change fails the check until CHANGELOG.md
 * acknowledges it.
 */

/** The entities of a subgraph's SDL, each with the field sets of its `@key`s. */
export function entityKeys(sdl: string): Map<string, Set<string>> {
  const keys = new Map<string, Set<string>>();
  for (const definition of parse(sdl).definitions) {
    if (definition.kind !== Kind.OBJECT_TYPE_DEFINITION && definition.kind !== Kind.OBJECT_TYPE_EXTENSION) continue;
    for (const directive of definition.directives ?? []) {
      if (directive.name.value !== 'key') continue;
      const fields = directive.arguments?.find((argument) => argument.name.value === 'fields')?.value;
      if (fields?.kind !== Kind.STRING) continue;
      const name = definition.name.value;
      keys.set(name, (keys.get(name) ?? new Set()).add((fields as StringValueNode).value.trim()));
    }
  }
  return keys;
}

/** The changes to the entities' keys from `base` to `next`: a key removed is breaking, a key added safe. */
export function entityKeyChanges(base: string, next: string): SchemaChange[] {
  const before = entityKeys(base);
  const after = entityKeys(next);
  const changes: SchemaChange[] = [];
  const change = (type: string, key: string, removed: boolean): SchemaChange => ({
    class: removed ? 'breaking' : 'safe',
    coordinate: type,
    message: removed
      ? `Key "${key}" removed from entity "${type}" (schema.subgraph.graphql)`
      : `Key "${key}" added to entity "${type}" (schema.subgraph.graphql)`,
    type: removed ? 'ENTITY_KEY_REMOVED' : 'ENTITY_KEY_ADDED',
    reason: removed ? 'the subgraphs that reference it by that key can no longer resolve it' : undefined,
    reaches: [],
  });
  for (const [type, keys] of before)
    for (const key of keys) if (!after.get(type)?.has(key)) changes.push(change(type, key, true));
  for (const [type, keys] of after)
    for (const key of keys) if (!before.get(type)?.has(key)) changes.push(change(type, key, false));
  return changes;
}
