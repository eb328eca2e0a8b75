import { getOperationAST, Kind, type DocumentNode, type FieldNode, type FragmentDefinitionNode, type ValueNode } from 'graphql';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './inputs.js';
import { connectionNodeFields, fieldsOf, headNeeds, type Fragments } from './selection.js';

/*
 * The upstream calls an operation can cost, worked out from the document before it runs, so an
 * operation over budget is refused with zero calls. It follows how the resolvers load data
 * (README, "GraphQL fields and the REST calls behind them") and errs high: the count is an upper
 * bound of what execution does, never below it (tests hold it to that). It reads the selection
 * as the planner does (`selection.ts`), so the two agree on which reads a listing takes.
 */

export interface EstimateOptions {
  /**
   * Count the planner's plan (`PLANNER=on`): a `heads` listing whose items need head_metadata or
   * Hair B fields is read through Get Heads Ext in one call instead of one more read per head.
   * Off (the default) counts the plain plan, which is an upper bound of both.
   */
  readonly planner?: boolean;
}

/** Page windows a connection may need: two pages, plus the probe of `last` without `before`. */
const windowCalls = (args: Args) => 2 + (args.last !== undefined && args.before === undefined ? 1 : 0);

type Args = Record<string, unknown>;

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
    case Kind.STRING:
      return node.value;
    default:
      // Present; its value does not change the count.
      return true;
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

/**
 * Completion reads one head costs beyond the read that produced it (`extended`: it has
 * head_metadata): head_metadata through the extended read, Hair B fields through a variant B read.
 * Variant A fields cost nothing: every read that lacks them is a variant B one, which the
 * planner only takes when no variant A field is selected.
 */
function headCompletion(fields: FieldNode[], fragments: Fragments, extended: boolean): number {
  const needs = headNeeds(fields, fragments);
  return (!extended && needs.metadata ? 1 : 0) + (needs.hairB ? 1 : 0);
}

const pageSize = (args: Args) => Math.min(MAX_PAGE_SIZE, Number(args.first ?? args.last ?? DEFAULT_PAGE_SIZE) || DEFAULT_PAGE_SIZE);

function headsCost(field: FieldNode, args: Args, fragments: Fragments, planner: boolean): number {
  const items = connectionNodeFields([field], fragments);
  const needs = headNeeds(items, fragments);
  // The planner's Get Heads Ext listing (no style filter there): its rows carry head_metadata and
  // Hair B and prime both for every item; variant A fields add the Get Heads window beside it.
  if (planner && args.style === undefined && (needs.metadata || needs.hairB)) return windowCalls(args) + (needs.variantA ? 1 : 0);
  return windowCalls(args) + pageSize(args) * headCompletion(items, fragments, false);
}

function rootFieldCost(field: FieldNode, fragments: Fragments, variables: Args, planner: boolean): number {
  const args = argsOf(field, variables);
  const sub = () => fieldsOf(field.selectionSet, fragments);
  switch (field.name.value) {
    case 'head':
    case 'node':
      return 1 + headCompletion(sub(), fragments, true);
    case 'nodes':
      return (Array.isArray(args.ids) ? args.ids.length : 1) * (1 + headCompletion(sub(), fragments, true));
    case 'heads':
      return headsCost(field, args, fragments, planner);
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

/** An upper bound of the upstream calls the operation makes, retries not counted. */
export function estimateUpstreamCalls(document: DocumentNode, operationName: string | null | undefined, variables: Args = {}, options: EstimateOptions = {}): number {
  const operation = getOperationAST(document, operationName) ?? undefined;
  if (!operation) return 0;
  const fragments = new Map(
    document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((d) => [d.name.value, d]),
  );
  // A variable the request leaves out takes its default (`$n: Int = 100`), as execution does.
  const values: Args = { ...variables };
  for (const definition of operation.variableDefinitions ?? []) {
    const name = definition.variable.name.value;
    if (values[name] === undefined && definition.defaultValue !== undefined) values[name] = valueOf(definition.defaultValue, {});
  }
  const planner = options.planner ?? false;
  return fieldsOf(operation.selectionSet, fragments).reduce((sum, field) => sum + rootFieldCost(field, fragments, values, planner), 0);
}
