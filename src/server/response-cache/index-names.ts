import type { CacheEntityRecord } from './cache.js';

/**
 * The index names an answer is found by, in either store: each entity's type (`Type`), and the
 * entity itself (`Type:id`) when it has an id, so that invalidating either evicts it.
 */
export function indexNamesOf(entities: Iterable<CacheEntityRecord>): Set<string> {
  const names = new Set<string>();
  for (const { typename, id } of entities) {
    names.add(typename);
    if (id != null) names.add(`${typename}:${id}`);
  }
  return names;
}

/**
 * The index name an invalidation of `entity` empties: the entity's own (`Type:id`), or its type's when it names no id.
 */
export const invalidatedNameOf = ({ typename, id }: CacheEntityRecord): string =>
  id == null ? typename : `${typename}:${id}`;
