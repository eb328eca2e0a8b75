import { Kind, type DocumentNode, type FieldNode, type FragmentDefinitionNode, type OperationDefinitionNode, type SelectionSetNode, type ValueNode } from 'graphql';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './inputs.js';

/*
 * The upstream calls an operation can cost, worked out from the document before it runs, so an
 * operation over budget is refused with zero calls. It follows how the resolvers load data
 * (README, "GraphQL fields and the REST calls behind them") and errs high: the count is an upper
 * bound of what execution does, never below it (tests hold it to that).
 */

/** Hair fields only a variant B read has: on a hair from a variant A read each costs a read. */
const hairBOnly = new Set(['hairMetadata', 'userId']);
/** Page windows a connection may need: two pages, plus the probe of `last` without `before`. */
const windowCalls = (args: Args) => 2 + (args.last !== undefined && args.before === undefined ? 1 : 0);

type Args = Record<string, unknown>;
type Fragments = ReadonlyMap<string, FragmentDefinitionNode>;

/** The fields a selection set asks for, with fragments spread in (type conditions ignored: errs high). */
function fieldsOf(selectionSet: SelectionSetNode | undefined, fragments: Fragments, seen = new Set<string>()): FieldNode[] {
  if (!selectionSet) return [];
  const fields: FieldNode[] = [];
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) fields.push(selection);
    else if (selection.kind === Kind.INLINE_FRAGMENT) fields.push(...fieldsOf(selection.selectionSet, fragments, seen));
    else if (!seen.has(selection.name.value)) {
      seen.add(selection.name.value);
      fields.push(...fieldsOf(fragments.get(selection.name.value)?.selectionSet, fragments, seen));
    }
  }
  return fields;
}

function valueOf(node: ValueNode, variables: Args): unknown {
  switch (node.kind) {
    case Kind.VARIABLE:
      return variables[node.name.value];
    case Kind.INT:
      return Number(node.value);
    case Kind.LIST:
      return node.values.map((v) => valueOf(v, variables));
    case Kind.NULL:
      return undefined;
    case Kind.OBJECT:
    case Kind.FLOAT:
    case Kind.STRING:
    case Kind.BOOLEAN:
    case Kind.ENUM:
      return Kind.STRING === node.kind ? node.value : true;
  }
}

function argsOf(field: FieldNode, variables: Args): Args {
  const args: Args = {};
  for (const arg of field.arguments ?? []) {
    const value = valueOf(arg.value, variables);
    if (value !== undefined && value !== null) args[arg.name.value] = value;
  }
  return args;
}

/** Completion reads one head costs beyond the read that produced it (`extended`: it has head_metadata). */
function headCompletion(fields: FieldNode[], fragments: Fragments, extended: boolean): number {
  const names = new Set(fields.map((f) => f.name.value));
  let calls = !extended && names.has('headMetadata') ? 1 : 0;
  const hairFields = fields.filter((f) => f.name.value === 'hair').flatMap((f) => fieldsOf(f.selectionSet, fragments));
  if (hairFields.some((f) => hairBOnly.has(f.name.value))) calls += 1;
  return calls;
}

/** The Head fields under a connection: `nodes { … }` and `edges { node { … } }`. */
function connectionNodeFields(field: FieldNode, fragments: Fragments): FieldNode[] {
  const fields = fieldsOf(field.selectionSet, fragments);
  const nodes = fields.filter((f) => f.name.value === 'nodes').flatMap((f) => fieldsOf(f.selectionSet, fragments));
  const edgeNodes = fields
    .filter((f) => f.name.value === 'edges')
    .flatMap((f) => fieldsOf(f.selectionSet, fragments))
    .filter((f) => f.name.value === 'node')
    .flatMap((f) => fieldsOf(f.selectionSet, fragments));
  return [...nodes, ...edgeNodes];
}

const pageSize = (args: Args) => Math.min(MAX_PAGE_SIZE, Number(args.first ?? args.last ?? DEFAULT_PAGE_SIZE) || DEFAULT_PAGE_SIZE);

function rootFieldCost(field: FieldNode, fragments: Fragments, variables: Args): number {
  const args = argsOf(field, variables);
  const sub = () => fieldsOf(field.selectionSet, fragments);
  switch (field.name.value) {
    case 'head':
    case 'node':
      return 1 + headCompletion(sub(), fragments, true);
    case 'nodes':
      return (Array.isArray(args.ids) ? args.ids.length : 1) * (1 + headCompletion(sub(), fragments, true));
    case 'heads':
      return windowCalls(args) + pageSize(args) * headCompletion(connectionNodeFields(field, fragments), fragments, false);
    case 'permissions':
      return windowCalls(args);
    case 'updateHead': {
      const head = sub()
        .filter((f) => f.name.value === 'head')
        .flatMap((f) => fieldsOf(f.selectionSet, fragments));
      return 1 + headCompletion(head, fragments, false);
    }
    case 'deleteHead':
    case 'updateSubscription':
    case 'login':
      return 1;
    default:
      return 0;
  }
}

/** The operation `execute` would run: the named one, or the only one. */
export function selectOperation(document: DocumentNode, operationName: string | null | undefined): OperationDefinitionNode | undefined {
  const operations = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
  return operationName ? operations.find((o) => o.name?.value === operationName) : operations.length === 1 ? operations[0] : undefined;
}

/** An upper bound of the upstream calls the operation makes, retries not counted. */
export function estimateUpstreamCalls(document: DocumentNode, operationName: string | null | undefined, variables: Args = {}): number {
  const operation = selectOperation(document, operationName);
  if (!operation) return 0;
  const fragments = new Map(
    document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]),
  );
  return fieldsOf(operation.selectionSet, fragments).reduce((sum, field) => sum + rootFieldCost(field, fragments, variables ?? {}), 0);
}
