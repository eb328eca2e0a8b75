import { collectFields } from '@graphql-tools/utils';
import { encodeGlobalID } from '@pothos/plugin-relay';
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FragmentDefinitionNode,
  type GraphQLError,
  type GraphQLSchema,
  getArgumentValues,
  getNamedType,
  getOperationAST,
  getVariableValues,
  isObjectType,
  Kind,
  TypeInfo,
  visit,
  visitWithTypeInfo,
} from 'graphql';
import { headIdFrom } from '../../domain/ids.js';
import { factsOf } from '../../plan/facts.js';
import type { CacheEntityRecord, FieldEvictions } from '../request-state.js';

/* What a mutation evicts, and whether a read failed upstream: pure rules, which plugin.ts applies. */

/** Upstream fault codes: what a stale answer may stand in for (never a refusal nor an answer of the upstream's). */
const faultCodes = new Set(['UPSTREAM_UNAVAILABLE', 'UPSTREAM_TIMEOUT', 'UPSTREAM_ERROR']);

/** The fault a read failed with, if all its errors are upstream faults; others (a 404, a refused input) are answers. */
export function upstreamFaultOf(result: ExecutionResult): string | undefined {
  const codes = (result.errors ?? []).map((error) => {
    const status = upstreamStatusOf(error);
    return status !== undefined && status < 500 ? undefined : error.extensions.code;
  });
  return codes.length > 0 && codes.every((code) => typeof code === 'string' && faultCodes.has(code))
    ? (codes[0] as string)
    : undefined;
}

/**
 * What a mutation changes beyond the objects it returns (`deleteHead` returns none), as its fields declare it
 * (`changes`, plan/facts.ts), by their arguments (not what was selected); by response key, for `changedFields`.
 */
export function evictionsOf(args: ExecutionArgs): FieldEvictions[] {
  const operation = getOperationAST(args.document, args.operationName);
  const mutationType = args.schema.getMutationType();
  if (operation?.operation !== 'mutation' || mutationType == null) return [];
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const definition of args.document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  // The variables as execution sees them: their defaults filled in (args.variableValues is what the client sent).
  const coerced = getVariableValues(args.schema, operation.variableDefinitions ?? [], args.variableValues ?? {});
  // Variables that do not coerce fail the mutation too: nothing changes.
  if (coerced.errors !== undefined) return [];
  const variables = coerced.coerced;
  const evictions: FieldEvictions[] = [];
  const { fields } = collectFields(args.schema, fragments, variables, mutationType, operation.selectionSet);
  for (const [key, [node]] of fields) {
    const field = node === undefined ? undefined : mutationType.getFields()[node.name.value];
    const changes = field === undefined ? undefined : factsOf(field).changes;
    if (node === undefined || field === undefined || changes === undefined) continue;
    const records: CacheEntityRecord[] = [];
    let head: FieldEvictions['head'];
    if (changes.head !== undefined) {
      let input: { id?: unknown } | undefined;
      try {
        input = getArgumentValues(field, node, variables)[changes.head] as { id?: unknown } | undefined;
      } catch {
        // Arguments that do not coerce fail the mutation too: nothing changes.
        continue;
      }
      const uuid = headIdFrom(input?.id);
      if (uuid !== undefined) {
        records.push({ typename: 'Head', id: encodeGlobalID('Head', uuid) });
        head = { id: uuid, deletes: changes.deletes === true };
      }
      for (const [name, types] of Object.entries(changes.given ?? {}))
        if ((input as Record<string, unknown> | undefined)?.[name] !== undefined)
          for (const typename of types) records.push({ typename });
    }
    for (const typename of changes.types ?? []) records.push({ typename });
    if (records.length > 0) evictions.push({ key, records, head });
  }
  return evictions;
}

/**
 * Whether a mutation field may have changed what it names: yes if the upstream may have taken it (no error, an answer
 * lost after sending, a 5xx, an unreadable 2xx); no if refused before sending (no upstream status) or answered 4xx.
 */
function mayHaveChanged(error: GraphQLError | undefined): boolean {
  if (error === undefined) return true;
  const code = error.extensions.code ?? (error.originalError as { code?: unknown } | undefined)?.code;
  if (code === 'UPSTREAM_OUTCOME_UNKNOWN') return true;
  const status = upstreamStatusOf(error);
  return status !== undefined && (status < 400 || status >= 500);
}

/** The HTTP status the upstream answered a field's call with, as its error says (schema/errors.ts), if it answered. */
function upstreamStatusOf(error: GraphQLError): number | undefined {
  const status =
    (error.extensions.upstream as { status?: unknown } | undefined)?.status ??
    (error.originalError as { status?: unknown } | undefined)?.status;
  return typeof status === 'number' ? status : undefined;
}

/** What a read finding heads gone (404) evicts: not every listing as a deletion does (a made-up id would empty all). */
export function goneHeadRecords(ids: readonly string[]): CacheEntityRecord[] {
  return ids.map((id) => ({ typename: 'Head', id: encodeGlobalID('Head', id) }));
}

/** The mutation fields of `fields` that may have changed what they name, by their outcome in `result`. */
export function changedFields(
  fields: readonly FieldEvictions[],
  result: ExecutionResult | undefined,
): FieldEvictions[] {
  // A field's own error is its outcome; one below it (a read of what it answered) says the field itself resolved.
  const errors = new Map<unknown, GraphQLError>();
  for (const error of result?.errors ?? [])
    if (error.path?.length === 1 && !errors.has(error.path[0])) errors.set(error.path[0], error);
  // An error of no field (a refusal of the whole operation) changed nothing.
  if (result === undefined || result.errors?.some((error) => error.path === undefined)) return [];
  return fields.filter((field) => mayHaveChanged(errors.get(field.key)));
}

const idlessTypes = new WeakMap<DocumentNode, readonly CacheEntityRecord[]>();

/** Object types without an `id` an operation selects (per document): else `heads { totalCount }` is never evicted. */
export function typesWithoutIds(schema: GraphQLSchema, document: DocumentNode): readonly CacheEntityRecord[] {
  const known = idlessTypes.get(document);
  if (known !== undefined) return known;
  const names = new Set<string>();
  const typeInfo = new TypeInfo(schema);
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      Field() {
        const type = getNamedType(typeInfo.getType());
        if (isObjectType(type) && type.getFields().id === undefined && type !== schema.getQueryType())
          names.add(type.name);
      },
    }),
  );
  const types = [...names].map((typename) => ({ typename }));
  idlessTypes.set(document, types);
  return types;
}
