import type { CacheEntityRecord } from './cache.js';

/** The names an answer is found by, in either store: each entity's `Type`, and its `Type:id`; either evicts it. */
export function indexNamesOf(entities: Iterable<CacheEntityRecord>): Set<string> {
  const names = new Set<string>();
  for (const { typename, id } of entities) {
    names.add(typename);
    if (id != null) names.add(`${typename}:${id}`);
  }
  return names;
}

/** The index name invalidating `entity` empties: `Type:id`, or `Type` when it names no id. */
export const invalidatedNameOf = ({ typename, id }: CacheEntityRecord): string =>
  id == null ? typename : `${typename}:${id}`;
