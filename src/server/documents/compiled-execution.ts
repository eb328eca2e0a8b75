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

export interface CompiledExecutionOptions {
  /** Executions of a document before it is compiled: one-off documents never pay for a compilation. */
  readonly afterExecutions: number;
  /** Largest document compiled, in field selections with its fragments spread out. */
  readonly maxFields: number;
  /** Compiled documents kept, the least recently used dropped first. */
  readonly maxEntries: number;
  /** Estimated heap bytes the compiled documents kept may hold together. */
  readonly maxBytes: number;
  /** Told of each operation run by its compiled code. */
  readonly onCompiledRun?: () => void;
  /** Given, once, what the compiled documents kept hold now (for the metrics' gauges). */
  readonly watchCache?: (use: () => CacheUse) => void;
}

/**
 * Heap a compiled document holds per field selection once it has run: graphql-jit's generated
 * source, its bytecode, feedback and closures (measured: docs/performance.md#measured-reasons).
 */
const BYTES_PER_FIELD = 8 * 1024;

type Compiled = { query: (root: unknown, context: unknown, variables: unknown) => unknown };

/** Field selections of a selection set with its fragments spread out, each fragment counted once (memoised). */
function expandedFields(
  selectionSet: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  memo: Map<string, number>,
): number {
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
function rootFields(
  selectionSet: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  into: Map<string, string>,
  spread: Set<string>,
): Map<string, string> {
  for (const selection of selectionSet.selections) {
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
 * The field selections of a document that may be compiled, or undefined: one operation (the
 * compiled code is the operation's, and its text the cache key), no directives anywhere
 * (graphql-jit 0.8 mishandles an @include nested in a skipped fragment, and @defer/@stream are the
 * interpreter's), and small: compiling costs tens of milliseconds for a document of a thousand
 * field selections, and a fragment spread a hundred times is compiled a hundred times. Nor a
 * document whose answer graphql-jit 0.8 could make otherwise than graphql-js (the differential
 * test holds the two to the same bytes):
 * - a non-null root field beside other root fields (`__typename` aside): its failure nulls the
 *   whole answer and graphql-js stops there (a synchronous failure starts no later root field, an
 *   asynchronous one answers without the errors still to come), where graphql-jit runs every root
 *   field to its end and reports every error. Below the root, a non-null field of this schema
 *   fails only where nothing beside it is left to run (Permission.role and totalCount read a page
 *   already answered; Head's and Hair's fields passed the upstream body check);
 * - an alias `__proto__`: graphql-jit writes each object as a literal, where that key sets the
 *   prototype instead of making the field.
 */
function compilableFields(document: DocumentNode, maxFields: number, schema: GraphQLSchema): number | undefined {
  const fragments = new Map<string, FragmentDefinitionNode>();
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  let refused = false;
  const scan = (node: {
    directives?: readonly unknown[];
    alias?: { value: string };
    selectionSet?: SelectionSetNode;
  }): void => {
    if (node.directives?.length || node.alias?.value === '__proto__') refused = true;
    for (const selection of node.selectionSet?.selections ?? []) scan(selection as never);
  };
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    if (definition.kind === Kind.FRAGMENT_DEFINITION || definition.kind === Kind.OPERATION_DEFINITION) scan(definition);
  }
  if (refused || operations.length !== 1) return undefined;
  const roots = [...rootFields(operations[0]!.selectionSet, fragments, new Map(), new Set()).values()];
  const queryFields = schema.getQueryType()?.getFields() ?? {};
  if (roots.length > 1 && roots.some((name) => isNonNullType(queryFields[name]?.type))) return undefined;
  const fields = expandedFields(operations[0]!.selectionSet, fragments, new Map());
  return fields <= maxFields ? fields : undefined;
}

/**
 * A compiled query's result, as the interpreter would give it: its errors given back their source
 * positions (graphql-jit's carry their locations only, which the masking needs to keep them).
 */
function finished(result: ExecutionResult, source: Source | undefined): ExecutionResult {
  const located =
    source !== undefined &&
    result.errors?.some((error) => error.locations !== undefined && error.positions === undefined);
  return located ? { ...result, errors: result.errors!.map((error) => withPositions(error, source)) } : result;
}

/**
 * graphql-jit compiles with `new Function`, and V8 keeps the source and bytecode of every such
 * function in its compilation cache (0.7 MB for a query of 190 field selections), which ordinary
 * garbage collections never empty: compiled documents dropped from the cache below would stay in
 * memory regardless. Nothing in the gateway evaluates the same source twice, so that cache buys
 * it nothing; it is turned off for the process as soon as compiled execution is on.
 */
function dropEvalSources(): void {
  setFlagsFromString('--no-compilation-cache');
}

export interface CompiledExecution {
  /**
   * Runs an operation by its compiled code, once its document is hot (compiled, or due to be, and
   * its variables coerce); undefined when the interpreter must run it.
   */
  run(args: ExecutionArgs): PromiseOrValue<ExecutionResult> | undefined;
}

/**
 * Compiled execution (graphql-jit), the execution stage's fast engine: a hot query is compiled
 * once into plain functions that resolve its fields, which cut the executor's cost per request.
 * Everything else runs on the interpreter: a document seen fewer than `afterExecutions` times, too
 * large, with directives, a mutation, variables that do not coerce (so their errors read as
 * graphql-js words them), or one graphql-jit cannot compile.
 *
 * Compiled code is held by one LRU cache by document text, bounded by count and by an estimate of
 * its heap, and by nothing else. What is kept per document (its runs so far, its size) follows the
 * prepared documents (documents/prepared.ts) in a WeakMap and holds no compiled code. Chosen by
 * the document it is called with: the response cache runs a document of its own (with the
 * `__typename` and `id` of the entities it collects), kept per document too.
 */
export function compiledExecution(options: CompiledExecutionOptions): CompiledExecution {
  dropEvalSources();
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
      state =
        fields !== undefined && fields * BYTES_PER_FIELD <= options.maxBytes
          ? { runs: 0, fields, text: undefined }
          : false;
      documents.set(args.document, state);
    }
    if (state === false || ++state.runs < options.afterExecutions) return undefined;
    state.text ??= getDocumentString(args.document) ?? print(args.document);
    const text = state.text;
    if (
      operation.variableDefinitions?.length &&
      getVariableValues(args.schema, operation.variableDefinitions, args.variableValues ?? {}).errors
    )
      return undefined;
    let query = compiled.get(text);
    if (query === undefined) {
      const result = compileQuery(args.schema, args.document, args.operationName ?? undefined);
      if (!isCompiledQuery(result)) {
        documents.set(args.document, false);
        return undefined;
      }
      query = result as unknown as Compiled;
      compiled.set(text, query, { size: state.fields * BYTES_PER_FIELD });
    }
    return query;
  };
  return {
    run(args) {
      const query = compiledFor(args);
      if (query === undefined) return undefined;
      const result = query.query(
        args.rootValue,
        args.contextValue,
        args.variableValues ?? {},
      ) as PromiseOrValue<ExecutionResult>;
      options.onCompiledRun?.();
      return mapMaybePromise(result, (done) => finished(done, args.document.loc?.source));
    },
  };
}

function withPositions(error: GraphQLError, source: Source): GraphQLError {
  if (error.locations === undefined || error.positions !== undefined) return error;
  const lineStarts = [0];
  for (let i = source.body.indexOf('\n'); i >= 0; i = source.body.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const positions = error.locations.map(({ line, column }) => (lineStarts[line - 1] ?? 0) + column - 1);
  return new GraphQLError(error.message, {
    source,
    positions,
    path: error.path,
    originalError: error.originalError,
    extensions: error.extensions,
  });
}
