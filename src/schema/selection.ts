import { Kind, type FieldNode, type FragmentDefinitionNode, type SelectionSetNode } from 'graphql';

/*
 * What an operation selects of a head, read from the document: the planner picks reads by it,
 * and the call estimate counts by it, so the two cannot disagree.
 */

export type Fragments = Readonly<Record<string, FragmentDefinitionNode>> | ReadonlyMap<string, FragmentDefinitionNode>;

const fragmentNamed = (fragments: Fragments, name: string) =>
  fragments instanceof Map ? fragments.get(name) : (fragments as Readonly<Record<string, FragmentDefinitionNode>>)[name];

/** The fields a selection set asks for, fragments spread in (type conditions ignored: errs wide). */
export function fieldsOf(selectionSet: SelectionSetNode | undefined, fragments: Fragments, seen = new Set<string>()): FieldNode[] {
  if (!selectionSet) return [];
  const fields: FieldNode[] = [];
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) fields.push(selection);
    else if (selection.kind === Kind.INLINE_FRAGMENT) fields.push(...fieldsOf(selection.selectionSet, fragments, seen));
    else if (!seen.has(selection.name.value)) {
      seen.add(selection.name.value);
      fields.push(...fieldsOf(fragmentNamed(fragments, selection.name.value)?.selectionSet, fragments, seen));
    }
  }
  return fields;
}

/** The fields of the items of a connection field: `nodes { … }` and `edges { node { … } }`. */
export function connectionNodeFields(connection: readonly FieldNode[], fragments: Fragments): FieldNode[] {
  const fields = connection.flatMap((f) => fieldsOf(f.selectionSet, fragments));
  const subfields = (name: string, of: FieldNode[]) => of.filter((f) => f.name.value === name).flatMap((f) => fieldsOf(f.selectionSet, fragments));
  return [...subfields('nodes', fields), ...subfields('node', subfields('edges', fields))];
}

/** Head fields only variant A reads carry. */
const headAOnly = new Set(['arUrl', 'updatedAt']);
/** Hair fields only Hair A carries. */
const hairAOnly = new Set(['sourceType', 'gender', 'objMetadata', 'payableData', 'updatedAt']);
/** Hair fields only Hair B carries. */
const hairBOnly = new Set(['hairMetadata', 'userId']);

/** Which facets of a head a selection needs beyond the fields both variants carry. */
export interface HeadNeeds {
  /** `headMetadata`: only extended reads carry it. */
  readonly metadata: boolean;
  /** Variant A fields: `updatedAt`, `arUrl`, or Hair A fields. */
  readonly variantA: boolean;
  /** Hair B fields: `hairMetadata`, `userId`. */
  readonly hairB: boolean;
}

export function headNeeds(headFields: readonly FieldNode[], fragments: Fragments): HeadNeeds {
  let metadata = false;
  let variantA = false;
  let hairB = false;
  for (const field of headFields) {
    const name = field.name.value;
    if (name === 'headMetadata') metadata = true;
    else if (headAOnly.has(name)) variantA = true;
    else if (name === 'hair') {
      for (const hairField of fieldsOf(field.selectionSet, fragments)) {
        if (hairAOnly.has(hairField.name.value)) variantA = true;
        else if (hairBOnly.has(hairField.name.value)) hairB = true;
      }
    }
  }
  return { metadata, variantA, hairB };
}

/** The needs of the head a field returns (`head`, `node`, `updateHead { head }` …). */
export const needsOfHeadField = (fieldNodes: readonly FieldNode[], fragments: Fragments): HeadNeeds =>
  headNeeds(
    fieldNodes.flatMap((f) => fieldsOf(f.selectionSet, fragments)),
    fragments,
  );

/** The needs of the heads a connection field returns. */
export const needsOfConnectionNodes = (fieldNodes: readonly FieldNode[], fragments: Fragments): HeadNeeds =>
  headNeeds(connectionNodeFields(fieldNodes, fragments), fragments);
