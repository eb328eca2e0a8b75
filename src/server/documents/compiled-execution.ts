import { setFlagsFromString } from 'node:v8';
import { getDocumentString } from '@envelop/core';
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FragmentDefinitionNode,
  GraphQLError,
  type GraphQLSchema,
  getOperationAST,
  getVariableValues,
  isNonNullType,
  Kind,
  print,
  type SelectionSetNode,
  type Source,
} from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';
import { mapMaybePromise, type PromiseOrValue } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import type { CacheUse } from '../instruments/metrics.js';
import { fragmentsOf } from './coordinates.js';

export interface CompiledExecutionOptions {
  /** Executions of a document before it is compiled: one-off documents never pay for a compilation. */
  readonly afterExecutions: number;
  /** Largest document compiled, in field selections with its fragments spread out. */
  readonly maxFields: number;
  readonly maxEntries: number;
  /** Estimated heap bytes of the compiled documents kept. */
  readonly maxBytes: number;
  readonly onCompiledRun?: () => void;
  /** Given, once, what the compiled documents kept hold (for the metrics' gauges). */
  readonly watchCache?: (use: () => CacheUse) => void;
}

/** Heap a compiled document holds per field selection once run (measured: docs/performance.md#measured-reasons). */
const BYTES_PER_FIELD = 8 * 1024;

type Fragments = ReadonlyMap<string, FragmentDefinitionNode>;
type Scanned = { directives?: readonly unknown[]; alias?: { value: string }; selectionSet?: SelectionSetNode };
type Compiled = { query: (root: unknown, context: unknown, variables: unknown) => PromiseOrValue<ExecutionResult> };

/** Field selections of a selection set with its fragments spread out, each fragment counted once (memoised). */
function expandedFields(selectionSet: SelectionSetNode, fragments: Fragments, memo: Map<string, number>): number {
  let count = 0;
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD)
      count += 1 + (selection.selectionSet ? expandedFields(selection.selectionSet, fragments, memo) : 0);
    else if (selection.kind === Kind.INLINE_FRAGMENT) count += expandedFields(selection.selectionSet, fragments, memo);
    else {
      const name = selection.name.value;
      if (!memo.has(name)) {
        memo.set(name, 0); // a cycle (refused by validation) counts nothing
        const fragment = fragments.get(name);
        memo.set(name, fragment ? expandedFields(fragment.selectionSet, fragments, memo) : 0);
      }
      count += memo.get(name)!;
    }
  }
  return count;
}

/** The root fields an operation selects, by response key (`__typename` left out), with its fragments spread out. */
function rootFields(node: SelectionSetNode, fragments: Fragments, into: Map<string, string>, spread: Set<string>) {
  for (const selection of node.selections) {
    if (selection.kind === Kind.FIELD) {
      if (selection.name.value !== '__typename')
        into.set(selection.alias?.value ?? selection.name.value, selection.name.value);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) rootFields(selection.selectionSet, fragments, into, spread);
    else if (!spread.has(selection.name.value)) {
      spread.add(selection.name.value);
      const fragment = fragments.get(selection.name.value);
      if (fragment) rootFields(fragment.selectionSet, fragments, into, spread);
    }
  }
  return into;
}

/**
 * The field selections of a document that may be compiled, or undefined: one operation (its text is the cache key),
 * no directives (graphql-jit 0.8 mishandles @include in a skipped fragment), small (a thousand fields take tens of ms;
 * a fragment compiles once per spread), and no answer graphql-jit words otherwise (the differential test): no non-null
 * root field beside others (graphql-js stops at its failure, graphql-jit runs them all; below the root this schema's
 * fail with nothing beside left to run), no alias `__proto__` (graphql-jit's object literals set the prototype).
 */
function compilableFields(document: DocumentNode, maxFields: number, schema: GraphQLSchema): number | undefined {
  const fragments = fragmentsOf(document);
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  let refused = false;
  const scan = (node: Scanned) => {
    if (node.directives?.length || node.alias?.value === '__proto__') refused = true;
    for (const selection of node.selectionSet?.selections ?? []) scan(selection as never);
  };
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION || definition.kind === Kind.OPERATION_DEFINITION) scan(definition);
  if (refused || operations.length !== 1) return undefined;
  const roots = [...rootFields(operations[0]!.selectionSet, fragments, new Map(), new Set()).values()];
  const queryFields = schema.getQueryType()?.getFields() ?? {};
  if (roots.length > 1 && roots.some((name) => isNonNullType(queryFields[name]?.type))) return undefined;
  const fields = expandedFields(operations[0]!.selectionSet, fragments, new Map());
  return fields <= maxFields ? fields : undefined;
}

/** The result with errors given back the source positions graphql-jit leaves out, which the masking needs. */
function finished(result: ExecutionResult, source: Source | undefined): ExecutionResult {
  const bare = (error: GraphQLError) => error.locations !== undefined && error.positions === undefined;
  if (source === undefined || !result.errors?.some(bare)) return result;
  const lineStarts = [0];
  for (let i = source.body.indexOf('\n'); i >= 0; i = source.body.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const located = (error: GraphQLError) =>
    new GraphQLError(error.message, {
      source,
      positions: error.locations!.map(({ line, column }) => (lineStarts[line - 1] ?? 0) + column - 1),
      path: error.path,
      originalError: error.originalError,
      extensions: error.extensions,
    });
  return { ...result, errors: result.errors.map((error) => (bare(error) ? located(error) : error)) };
}

export interface CompiledExecution {
  /** Runs an operation by its compiled code once its document is hot and its variables coerce; else undefined. */
  run(args: ExecutionArgs): PromiseOrValue<ExecutionResult> | undefined;
}

/** Hot queries run by graphql-jit; those whose variables do not coerce by the interpreter, which words their errors. */
export function compiledExecution(options: CompiledExecutionOptions): CompiledExecution {
  // V8's compilation cache keeps graphql-jit's `new Function` sources past ordinary GCs (0.7 MB for 190 field
  // selections), and the gateway never evaluates a source twice: off for the process.
  setFlagsFromString('--no-compilation-cache');
  const documents = new WeakMap<DocumentNode, { runs: number; fields: number; text: string | undefined } | false>();
  const compiled = new LRUCache<string, Compiled>({ max: options.maxEntries, maxSize: options.maxBytes });
  options.watchCache?.(() => ({ entries: compiled.size, bytes: compiled.calculatedSize }));
  const compiledFor = (args: ExecutionArgs): Compiled | undefined => {
    const operation = getOperationAST(args.document, args.operationName);
    if (operation?.operation !== 'query') return undefined;
    let state = documents.get(args.document);
    if (state === undefined) {
      const fields = compilableFields(args.document, options.maxFields, args.schema);
      // One larger than the whole budget would be compiled again on every request.
      const fits = fields !== undefined && fields * BYTES_PER_FIELD <= options.maxBytes;
      state = fits ? { runs: 0, fields, text: undefined } : false;
      documents.set(args.document, state);
    }
    if (state === false || ++state.runs < options.afterExecutions) return undefined;
    state.text ??= getDocumentString(args.document) ?? print(args.document);
    const definitions = operation.variableDefinitions;
    if (definitions?.length && getVariableValues(args.schema, definitions, args.variableValues ?? {}).errors)
      return undefined;
    const kept = compiled.get(state.text);
    if (kept !== undefined) return kept;
    const result = compileQuery(args.schema, args.document, args.operationName ?? undefined);
    if (!isCompiledQuery(result)) {
      documents.set(args.document, false);
      return undefined;
    }
    const query = result as unknown as Compiled;
    compiled.set(state.text, query, { size: state.fields * BYTES_PER_FIELD });
    return query;
  };
  return {
    run(args) {
      const query = compiledFor(args);
      if (query === undefined) return undefined;
      const result = query.query(args.rootValue, args.contextValue, args.variableValues ?? {});
      options.onCompiledRun?.();
      return mapMaybePromise(result, (done) => finished(done, args.document.loc?.source));
    },
  };
}
