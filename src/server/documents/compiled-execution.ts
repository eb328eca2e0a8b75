import { getDocumentString } from '@envelop/core';
import { getOperationAST, getVariableValues, GraphQLError, Kind, print, type DocumentNode, type ExecutionArgs, type ExecutionResult, type FragmentDefinitionNode, type GraphQLSchema, type SelectionSetNode, type Source } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';
import { makeExecute, mapMaybePromise, type Plugin, type PromiseOrValue } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';
import { setFlagsFromString } from 'node:v8';
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

type Compiled = { query: (root: unknown, context: unknown, variables: unknown) => unknown; stringify: (result: unknown) => string };

/** Field selections of a selection set with its fragments spread out, each fragment counted once (memoised). */
function expandedFields(selectionSet: SelectionSetNode, fragments: ReadonlyMap<string, FragmentDefinitionNode>, memo: Map<string, number>): number {
  let count = 0;
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) count += 1 + (selection.selectionSet ? expandedFields(selection.selectionSet, fragments, memo) : 0);
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

/**
 * The field selections of a document that may be compiled, or undefined: one operation (the
 * compiled code is the operation's, and its text the cache key), no directives anywhere
 * (graphql-jit 0.8 mishandles an @include nested in a skipped fragment, and @defer/@stream are the
 * interpreter's), and small: compiling costs tens of milliseconds for a document of a thousand
 * field selections, and a fragment spread a hundred times is compiled a hundred times.
 */
function compilableFields(document: DocumentNode, maxFields: number): number | undefined {
  const fragments = new Map<string, FragmentDefinitionNode>();
  const operations = document.definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
  let directives = false;
  const scan = (node: { directives?: readonly unknown[]; selectionSet?: SelectionSetNode }): void => {
    if (node.directives?.length) directives = true;
    for (const selection of node.selectionSet?.selections ?? []) scan(selection as never);
  };
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    if (definition.kind === Kind.FRAGMENT_DEFINITION || definition.kind === Kind.OPERATION_DEFINITION) scan(definition);
  }
  if (directives || operations.length !== 1) return undefined;
  const fields = expandedFields(operations[0]!.selectionSet, fragments, new Map());
  return fields <= maxFields ? fields : undefined;
}

/** A compiled query's result: its errors given back their source positions, the query's own serialiser on it. */
function finished(result: ExecutionResult, compiled: Compiled, source: Source | undefined): ExecutionResult & { stringify: Compiled['stringify'] } {
  // graphql-jit's errors carry their locations but no source positions, which yoga needs to keep
  // them when it serialises; they are given theirs back from the document's source.
  const located = source !== undefined && result.errors?.some((error) => error.locations !== undefined && error.positions === undefined);
  return Object.assign(located ? { ...result, errors: result.errors!.map((error) => withPositions(error, source)) } : result, { stringify: compiled.stringify });
}

/**
 * Runs a compiled query on an operation's context; `ran` is told once the compiled code has run
 * (not when it was chosen: a later plugin could still replace the execute function).
 */
function runCompiled(compiled: Compiled, document: DocumentNode, rootValue: unknown, context: unknown, variables: unknown, ran: (() => void) | undefined): PromiseOrValue<ExecutionResult> {
  const result = compiled.query(rootValue, context, variables) as PromiseOrValue<ExecutionResult>;
  ran?.();
  return mapMaybePromise(result, (done) => finished(done, compiled, document.loc?.source));
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

/** A hot query, compiled: run on an operation's context (its result as the pipeline's compiled run gives it). */
export type HotQuery = (context: unknown) => PromiseOrValue<ExecutionResult>;

export interface CompiledExecution {
  /** The pipeline's part: it runs each hot query's compiled code in place of yoga's executor. */
  readonly plugin: Plugin;
  /**
   * The compiled code of a query the pipeline has executed, by its parsed document (yoga's parse
   * cache's): only a document that reached execution through the pipeline, so parsed, validated and
   * within every limit there, and only when its code would run there (compiled, or due to be, and
   * its variables coerce). Undefined otherwise: the pipeline takes it.
   */
  hot(document: DocumentNode, operationName: string | null | undefined, variables: Record<string, unknown> | null | undefined): HotQuery | undefined;
}

/**
 * Compiled execution (graphql-jit): a hot query is compiled once into plain functions that
 * resolve its fields and serialise its result, which cut the executor's and the serialiser's cost
 * per request. Everything else runs on yoga's executor: a document seen fewer than
 * `afterExecutions` times, too large, with directives, a mutation, variables that do not coerce
 * (so their errors read as graphql-js words them), or one graphql-jit cannot compile.
 *
 * Compiled code is held by one LRU cache by document text, bounded by count and by an estimate of
 * its heap, and by nothing else: @envelop/graphql-jit also keeps every compiled document in a
 * WeakMap by DocumentNode, which yoga's parse cache keeps alive far beyond any bound here.
 */
export function compiledExecution(schema: GraphQLSchema, options: CompiledExecutionOptions): CompiledExecution {
  dropEvalSources();
  // Per document: its executions so far and its size, or false when it stays interpreted.
  // Follows yoga's parse cache (a WeakMap); holds no compiled code.
  const documents = new WeakMap<DocumentNode, { runs: number; fields: number; text: string | undefined } | false>();
  const compiled = new LRUCache<string, Compiled>({ max: options.maxEntries, maxSize: options.maxBytes });
  options.watchCache?.(() => ({ entries: compiled.size, bytes: compiled.calculatedSize }));
  const compiledFor = (args: Pick<ExecutionArgs, 'schema' | 'document' | 'operationName' | 'variableValues'>): Compiled | undefined => {
    const operation = getOperationAST(args.document, args.operationName);
    if (operation?.operation !== 'query') return undefined;
    let state = documents.get(args.document);
    if (state === undefined) {
      const fields = compilableFields(args.document, options.maxFields);
      // One larger than the whole budget would be compiled again on every request.
      documents.set(args.document, (state = fields !== undefined && fields * BYTES_PER_FIELD <= options.maxBytes ? { runs: 0, fields, text: undefined } : false));
    }
    if (state === false || ++state.runs < options.afterExecutions) return undefined;
    // A document a plugin before execution made (the response cache's, with its __typename and id) has no text of yoga's.
    const text = (state.text ??= getDocumentString(args.document) ?? print(args.document));
    if (operation.variableDefinitions?.length && getVariableValues(args.schema, operation.variableDefinitions, args.variableValues ?? {}).errors) return undefined;
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
  const plugin: Plugin = {
    onExecute({ args, executeFn, setExecuteFn }) {
      if (getOperationAST(args.document, args.operationName)?.operation !== 'query') return;
      // Chosen when called, by the document it is called with: the response cache, after this
      // plugin, wraps this function and runs a document of its own (the entities it collects).
      setExecuteFn((called) => {
        const query = compiledFor(called);
        return query === undefined ? executeFn(called) : makeExecute((run) => runCompiled(query, run.document, run.rootValue, run.contextValue, run.variableValues, options.onCompiledRun))(called);
      });
    },
  };
  return {
    plugin,
    hot(document, operationName, variables) {
      // Only a document the pipeline has run: the entry it made as it did.
      if (!documents.has(document)) return undefined;
      const query = compiledFor({ schema, document, operationName, variableValues: variables });
      return query && ((context) => runCompiled(query, document, undefined, context, variables ?? {}, options.onCompiledRun));
    },
  };
}

function withPositions(error: GraphQLError, source: Source): GraphQLError {
  if (error.locations === undefined || error.positions !== undefined) return error;
  const lineStarts = [0];
  for (let i = source.body.indexOf('\n'); i >= 0; i = source.body.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const positions = error.locations.map(({ line, column }) => (lineStarts[line - 1] ?? 0) + column - 1);
  return new GraphQLError(error.message, { source, positions, path: error.path, originalError: error.originalError, extensions: error.extensions });
}
