import type { CacheEntityRecord } from '../request-state.js';

/** The index name invalidating `entity` empties: `Type:id`, or `Type` when it names no id. */
export const invalidatedNameOf = ({ typename, id }: CacheEntityRecord): string =>
  id == null ? typename : `${typename}:${id}`;

/** The names an answer is found by, in either store: each entity's `Type`, and its `Type:id`; either evicts it. */
export const indexNamesOf = (entities: Iterable<CacheEntityRecord>): Set<string> =>
  new Set(Array.from(entities, (entity) => [entity.typename, invalidatedNameOf(entity)]).flat());
