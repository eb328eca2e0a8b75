import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLDirective,
  GraphQLIncludeDirective,
  type GraphQLNamedType,
  type GraphQLSchema,
  GraphQLSkipDirective,
  getDirectiveValues,
  getNamedType,
  isAbstractType,
  isInterfaceType,
  isObjectType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';

/*
 * Incremental delivery in the format of graphql-js 17.0.0-alpha.9 (Apollo's `incrementalSpec=v0.2`),
 * from the parts graphql-tools' executor writes in the format of 2022-08-24:
 *
 *   2022-08-24                                    alpha.9
 *   { data, hasNext }                             { data, pending: [{ id, path, label }], hasNext }
 *   { incremental: [{ data, path, label }] }      { incremental: [{ id, data }], completed: [{ id }] }
 *   { incremental: [{ items, path: [..., i] }] }  { incremental: [{ id, items }] }  (completed when the answer ends)
 *
 * A fragment or list is announced in the part that first holds its object (or first items), walking the operation
 * along the data as the executor did; when the walk cannot tell (no `__typename`), in the part that delivers it.
 */

type Path = readonly (string | number)[];
type Data = Record<string, unknown>;

type Directed = Parameters<typeof getDirectiveValues>[1];

type Pending = { readonly id: string; readonly path: Path; readonly label?: string };

/** Something the executor delivers later: a deferred fragment, or the rest of a streamed list. */
interface Site {
  readonly kind: 'defer' | 'stream';
  readonly path: Path;
  readonly label: string | undefined;
  /** The deferred fragment's, or the streamed field's (none for a list of scalars). */
  readonly selectionSet: SelectionSetNode | undefined;
  /** The object's (defer) or the items' (stream). */
  readonly type: GraphQLNamedType;
}

interface IncrementalEntry {
  readonly data?: Record<string, unknown> | null;
  readonly items?: readonly unknown[] | null;
  readonly path?: Path;
  readonly label?: string;
  readonly errors?: readonly unknown[];
  readonly extensions?: Record<string, unknown>;
}

/** A part as graphql-tools' executor writes it (2022-08-24). */
export interface Payload2022 {
  readonly data?: Record<string, unknown> | null;
  readonly errors?: readonly unknown[];
  readonly incremental?: readonly IncrementalEntry[];
  readonly hasNext?: boolean;
  readonly extensions?: Record<string, unknown>;
}

const keyOf = (path: Path, label: string | undefined) => `${label ?? ''}\u0000${path.join('\u0000')}`;

/** The walk of the operation along the data delivered, finding the sites each part opens. */
class SiteFinder {
  private readonly fragments = new Map<string, FragmentDefinitionNode>();
  private readonly defer: GraphQLDirective | undefined;
  private readonly stream: GraphQLDirective | undefined;

  constructor(
    private readonly schema: GraphQLSchema,
    document: DocumentNode,
    private readonly variables: Record<string, unknown>,
  ) {
    for (const definition of document.definitions)
      if (definition.kind === Kind.FRAGMENT_DEFINITION) this.fragments.set(definition.name.value, definition);
    this.defer = schema.getDirective('defer') ?? undefined;
    this.stream = schema.getDirective('stream') ?? undefined;
  }

  inObject(selectionSet: SelectionSetNode, type: GraphQLNamedType, data: Data, path: Path, found: Site[]): void {
    const runtime = this.runtimeType(type, data);
    for (const selection of selectionSet.selections) {
      if (!this.included(selection)) continue;
      if (selection.kind === Kind.FIELD) {
        this.inField(selection, runtime ?? type, data, path, found);
        continue;
      }
      const fragment = selection.kind === Kind.INLINE_FRAGMENT ? selection : this.fragments.get(selection.name.value);
      if (fragment === undefined) continue;
      const condition = fragment.typeCondition ? this.schema.getType(fragment.typeCondition.name.value) : undefined;
      // Skipped when it does not apply, or may not (no runtime type): then it is announced when delivered (a fragment
      // announced that never comes would hold a client).
      if (condition !== undefined && (runtime === undefined || !this.typeApplies(condition, runtime))) continue;
      const label = this.activeLabel(this.defer, selection);
      if (label !== false)
        found.push({ kind: 'defer', path, label, selectionSet: fragment.selectionSet, type: runtime ?? type });
      else this.inObject(fragment.selectionSet, runtime ?? type, data, path, found);
    }
  }

  inItems(site: Site, items: readonly unknown[], from: number, found: Site[]): void {
    if (site.selectionSet === undefined) return;
    for (const [i, item] of items.entries())
      this.inValue(site.selectionSet, site.type, item, [...site.path, from + i], found);
  }

  private inField(field: FieldNode, type: GraphQLNamedType, data: Data, path: Path, found: Site[]): void {
    const key = field.alias?.value ?? field.name.value;
    const value = data[key];
    if (value === undefined || value === null || field.name.value === '__typename') return;
    const definition = isObjectType(type) || isInterfaceType(type) ? type.getFields()[field.name.value] : undefined;
    if (definition === undefined) return;
    const itemType = getNamedType(definition.type);
    const fieldPath = [...path, key];
    const label = Array.isArray(value) ? this.activeLabel(this.stream, field) : false;
    if (label !== false)
      found.push({ kind: 'stream', path: fieldPath, label, selectionSet: field.selectionSet, type: itemType });
    if (field.selectionSet) this.inValue(field.selectionSet, itemType, value, fieldPath, found);
  }

  private inValue(selectionSet: SelectionSetNode, type: GraphQLNamedType, value: unknown, path: Path, found: Site[]) {
    if (value === null || typeof value !== 'object') return;
    if (Array.isArray(value))
      for (const [i, item] of value.entries()) this.inValue(selectionSet, type, item, [...path, i], found);
    else this.inObject(selectionSet, type, value as Data, path, found);
  }

  private runtimeType(type: GraphQLNamedType, data: Data): GraphQLNamedType | undefined {
    if (isObjectType(type)) return type;
    return typeof data.__typename === 'string' ? this.schema.getType(data.__typename) : undefined;
  }

  private typeApplies(condition: GraphQLNamedType, runtime: GraphQLNamedType): boolean {
    if (condition === runtime) return true;
    return isAbstractType(condition) && isObjectType(runtime) && this.schema.isSubType(condition, runtime);
  }

  private included(node: Directed): boolean {
    if (!node.directives?.length) return true;
    return (
      getDirectiveValues(GraphQLSkipDirective, node, this.variables)?.if !== true &&
      getDirectiveValues(GraphQLIncludeDirective, node, this.variables)?.if !== false
    );
  }

  /** The label of an active @defer or @stream (undefined without one), or false when there is none. */
  private activeLabel(directive: GraphQLDirective | undefined, node: Directed): string | undefined | false {
    if (directive === undefined || !node.directives?.length) return false;
    const values = getDirectiveValues(directive, node, this.variables);
    if (values === undefined || values.if === false) return false;
    return typeof values.label === 'string' ? values.label : undefined;
  }
}

/** An answer's announcements not completed, by site key (with the site when the walk foresaw it), and its next id. */
interface Announced {
  readonly open: Map<string, { pending: Pending; site: Site | undefined }>;
  nextId: number;
}

/** Announces the site at `path` as pending, into `into`: what is now open. */
function opened(announced: Announced, path: Path, label: string | undefined, site: Site | undefined, into: Pending[]) {
  const known = { pending: { id: String(announced.nextId++), path, ...(label === undefined ? {} : { label }) }, site };
  announced.open.set(keyOf(path, label), known);
  into.push(known.pending);
  return known;
}

/** Announces as pending, into `into`, those of `sites` not announced yet. */
function announce(announced: Announced, sites: readonly Site[], into: Pending[]): void {
  for (const site of sites)
    if (!announced.open.has(keyOf(site.path, site.label))) opened(announced, site.path, site.label, site, into);
}

/** Rewrites an entry of a later part under its site's id, into the part's `incremental`, `completed` and `pending`. */
function rewriteEntry(
  entry: IncrementalEntry,
  finder: SiteFinder,
  announced: Announced,
  pending: Pending[],
  incremental: Record<string, unknown>[],
  completed: Record<string, unknown>[],
) {
  const path = entry.path ?? [];
  const streamed = 'items' in entry;
  const sitePath = streamed ? path.slice(0, -1) : path;
  const key = keyOf(sitePath, entry.label);
  // Not foreseen by the walk (its type was not known): announced now.
  const known = announced.open.get(key) ?? opened(announced, sitePath, entry.label, undefined, pending);
  const { id } = known.pending;
  const errors = entry.errors ? { errors: entry.errors } : {};
  const extensions = entry.extensions ? { extensions: entry.extensions } : {};
  const complete = (extra: object = {}) => {
    completed.push({ id, ...extra });
    announced.open.delete(key);
  };
  const sites: Site[] = [];
  if (streamed) {
    if (entry.items == null) return complete(errors);
    if (known.site) finder.inItems(known.site, entry.items, Number(path[path.length - 1]), sites);
    incremental.push({ id, items: entry.items, ...errors, ...extensions });
  } else {
    if (entry.data == null) return complete(errors);
    if (known.site?.selectionSet) finder.inObject(known.site.selectionSet, known.site.type, entry.data, path, sites);
    incremental.push({ id, data: entry.data, ...errors, ...extensions });
    complete();
  }
  announce(announced, sites, pending);
}

/** Rewrites one answer's parts, in order, from 2022-08-24's format to alpha.9's: one per answer (it remembers). */
export function alpha9Payloads(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown> | null | undefined,
): (payload: Payload2022) => Record<string, unknown> {
  const finder = new SiteFinder(schema, document, variables ?? {});
  const operation = document.definitions.find(
    (d): d is OperationDefinitionNode =>
      d.kind === Kind.OPERATION_DEFINITION && (operationName == null || d.name?.value === operationName),
  );
  const rootType = operation && schema.getRootType(operation.operation);
  const announced: Announced = { open: new Map(), nextId: 0 };

  return (payload) => {
    const pending: Pending[] = [];
    const incremental: Record<string, unknown>[] = [];
    const completed: Record<string, unknown>[] = [];
    const { incremental: entries, hasNext, ...rest } = payload;
    const out: Record<string, unknown> = { ...rest };

    if ('data' in payload && entries === undefined) {
      // The initial part: the sites it opens.
      const sites: Site[] = [];
      if (payload.data && rootType && operation)
        finder.inObject(operation.selectionSet, rootType, payload.data, [], sites);
      announce(announced, sites, pending);
      out.pending = pending;
    }

    for (const entry of entries ?? []) rewriteEntry(entry, finder, announced, pending, incremental, completed);

    if (hasNext === false) {
      // The answer ends: streams (which the 2022 format never closes) and anything still open.
      for (const known of announced.open.values()) completed.push({ id: known.pending.id });
      announced.open.clear();
    }
    if (entries !== undefined && pending.length > 0) out.pending = pending;
    if (incremental.length > 0) out.incremental = incremental;
    if (completed.length > 0) out.completed = completed;
    if (hasNext !== undefined) out.hasNext = hasNext;
    return out;
  };
}
