import { type Change, CriticalityLevel, diff } from '@graphql-inspector/core';
import {
  type GraphQLSchema,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isIntrospectionType,
  isObjectType,
} from 'graphql';
import { memberCoordinates } from './schema-coordinates.js';

/*
 * The changes between two schemas, as @graphql-inspector/core classifies them (breaking,
 * dangerous, safe), each named by its schema coordinate (`Head.arUrl`, `Query.head(id:)`,
 * `Style.D`, `Meta`, `@live`) and with the coordinates an operation must select to be touched by
 * it: the same coordinates the gateway counts (src/server/documents/coordinates.ts).
 */

export type ChangeClass = 'breaking' | 'dangerous' | 'safe';

export interface SchemaChange {
  readonly class: ChangeClass;
  /** The schema coordinate it changes (`schema` for a change of the root types). */
  readonly coordinate: string;
  /** What @graphql-inspector/core says of it. */
  readonly message: string;
  /** @graphql-inspector/core's change type (`FIELD_REMOVED`, …). */
  readonly type: string;
  /** Why the inspector classed it so, when it says. */
  readonly reason: string | undefined;
  /**
   * The coordinates (of the base schema, or the new one for what it adds) whose selection the
   * change reaches: an operation selecting any of them is touched, and their uses are its uses.
   */
  readonly reaches: readonly string[];
}

const classOf: Record<CriticalityLevel, ChangeClass> = {
  [CriticalityLevel.Breaking]: 'breaking',
  [CriticalityLevel.Dangerous]: 'dangerous',
  [CriticalityLevel.NonBreaking]: 'safe',
};

/**
 * What a named type's coordinates are: its kind, its own members (`T.f`, `I.x`, `E.V`) and the
 * coordinates whose type it is (fields returning it, arguments and input fields taking it).
 */
interface TypeCoordinates {
  readonly kind: 'output' | 'input' | 'enum' | 'other';
  readonly members: Set<string>;
  readonly typedAs: Set<string>;
}

/** Every named type's coordinates in `schema`. */
function coordinateIndex(schema: GraphQLSchema): Map<string, TypeCoordinates> {
  const index = new Map<string, TypeCoordinates>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (isIntrospectionType(type)) continue;
    const kind =
      isObjectType(type) || isInterfaceType(type)
        ? 'output'
        : isInputObjectType(type)
          ? 'input'
          : isEnumType(type)
            ? 'enum'
            : 'other';
    index.set(type.name, { kind, members: new Set(), typedAs: new Set() });
  }
  for (const { coordinate, parent, type } of memberCoordinates(schema)) {
    // An argument is its field's, not a member of the type.
    if (!coordinate.endsWith(':)')) index.get(parent.name)!.members.add(coordinate);
    if (type !== undefined) index.get(type.name)?.typedAs.add(coordinate);
  }
  return index;
}

/**
 * The change's path as a schema coordinate: `Type.field.arg` is `Type.field(arg:)`; a directive's part
 * (`.@deprecated…`) is left off.
 */
export function coordinateOf(change: Pick<Change, 'path' | 'type'>): string {
  if (change.path === undefined) return 'schema';
  const parts = change.path.split('.');
  const at = parts.findIndex((part, i) => i > 0 && part.startsWith('@'));
  const kept = at < 0 ? parts : parts.slice(0, at);
  const [first, second, third] = kept;
  if (first!.startsWith('@')) return second === undefined ? first! : `${first}(${second}:)`;
  if (third !== undefined) return `${first}.${second}(${third}:)`;
  return second === undefined ? first! : `${first}.${second}`;
}

/** The coordinates a change to `coordinate` reaches (see SchemaChange.reaches), in either schema's index. */
function reachOf(coordinate: string, type: string, indexes: readonly Map<string, TypeCoordinates>[]): string[] {
  if (coordinate.startsWith('@') || coordinate === 'schema') return [coordinate.replace(/\(.*$/, '')];
  const argument = /^(\w+)\.(\w+)\((\w+):\)$/.exec(coordinate);
  // Giving an argument that is gone touches those that give it; any other change to one (its type, its default, one
  // added) every selection of its field.
  if (argument !== null) return [type === 'FIELD_ARGUMENT_REMOVED' ? coordinate : `${argument[1]}.${argument[2]}`];
  const reached = new Set<string>();
  const [typeName, member] = coordinate.split('.') as [string, string | undefined];
  if (member !== undefined) reached.add(coordinate);
  for (const index of indexes) {
    const named = index.get(typeName);
    if (named === undefined) continue;
    if (member === undefined) {
      // A type removed, its kind changed, a member of a union or an interface of an object gone: its fields, and
      // whatever has it as type.
      for (const c of named.members) reached.add(c);
      for (const c of named.typedAs) reached.add(c);
    } else if (named.kind === 'enum' || named.kind === 'input') {
      // An enum value or an input field: also whatever reads or takes its type (a value sent in a variable is not in
      // the document).
      for (const c of named.typedAs) reached.add(c);
    }
  }
  if (reached.size === 0) reached.add(coordinate);
  return [...reached].sort();
}

/**
 * Whether a change is one of the directive-usage changes @deprecated makes beside FIELD_DEPRECATION_*: the same news
 * twice.
 */
const repeatsDeprecation = (change: Change) =>
  change.type.startsWith('DIRECTIVE_USAGE_') && change.path?.includes('.@deprecated') === true;

/**
 * The changes from `base` to `next`, classified, each with its coordinate and what it reaches; in the inspector's
 * order.
 */
export async function schemaChanges(base: GraphQLSchema, next: GraphQLSchema): Promise<SchemaChange[]> {
  const indexes = [coordinateIndex(base), coordinateIndex(next)];
  const changes = await diff(base, next);
  return changes
    .filter((change) => !repeatsDeprecation(change))
    .map((change) => {
      const coordinate = coordinateOf(change);
      return {
        class: classOf[change.criticality.level],
        coordinate,
        message: change.message,
        type: change.type,
        reason: change.criticality.reason,
        reaches: reachOf(coordinate, change.type, indexes),
      };
    });
}
