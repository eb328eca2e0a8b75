import { useGraphQlJit } from '@envelop/graphql-jit';
import { getDocumentString } from '@envelop/core';
import { getOperationAST, getVariableValues, GraphQLError, Kind, type DocumentNode, type ExecutionArgs, type FragmentDefinitionNode, type SelectionSetNode, type Source } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';
import { handleStreamOrSingleExecutionResult, type Plugin } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';

export interface CompiledExecutionOptions {
  /** Executions of a document before it is compiled: one-off documents never pay for a compilation. */
  readonly afterExecutions: number;
  /** Largest document compiled, in field selections with its fragments spread out. */
  readonly maxFields: number;
}

/** Compiled documents kept by text. */
const COMPILED_DOCUMENTS = 500;

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
 * Whether a document may be compiled: no directives anywhere (graphql-jit 0.8 mishandles an
 * @include nested in a skipped fragment, and @defer/@stream are the interpreter's), and small:
 * compiling costs tens of milliseconds for a document of a thousand field selections, and a
 * fragment spread a hundred times is compiled a hundred times.
 */
function compilable(document: DocumentNode, maxFields: number): boolean {
  const fragments = new Map<string, FragmentDefinitionNode>();
  let directives = false;
  const scan = (node: { directives?: readonly unknown[]; selectionSet?: SelectionSetNode }): void => {
    if (node.directives?.length) directives = true;
    for (const selection of node.selectionSet?.selections ?? []) scan(selection as never);
  };
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    if (definition.kind === Kind.FRAGMENT_DEFINITION || definition.kind === Kind.OPERATION_DEFINITION) scan(definition);
  }
  if (directives) return false;
  const memo = new Map<string, number>();
  return document.definitions.every((definition) => definition.kind !== Kind.OPERATION_DEFINITION || expandedFields(definition.selectionSet, fragments, memo) <= maxFields);
}

/**
 * Compiled execution (graphql-jit, through @envelop/graphql-jit): a hot query is compiled once
 * into plain functions that resolve its fields and serialise its result, which cut the
 * executor's and the serialiser's cost per request. Everything else runs on yoga's executor: a
 * document seen fewer than `afterExecutions` times, too large, with directives, a mutation,
 * variables that do not coerce (so their errors read as graphql-js words them), or one
 * graphql-jit cannot compile (checked here, so it falls back instead of answering the error).
 */
export function useCompiledExecution(options: CompiledExecutionOptions): Plugin {
  const documents = new WeakMap<DocumentNode, { runs: number; compiled?: Compiled | false }>();
  // Bounded like yoga's parse cache, whose documents the plugin's own WeakMap follows.
  const byText = new LRUCache<string, Compiled>({ max: COMPILED_DOCUMENTS });
  // The plugin's own cache by document text, fed here with what was compiled (or checked) already.
  const cache = {
    get: (text: string) => byText.get(text),
    set: () => undefined,
  };
  const enableIf = (args: ExecutionArgs): boolean => {
    const operation = getOperationAST(args.document, args.operationName);
    if (operation?.operation !== 'query') return false;
    let state = documents.get(args.document);
    if (state === undefined) documents.set(args.document, (state = { runs: 0, ...(compilable(args.document, options.maxFields) ? {} : { compiled: false }) }));
    if (state.compiled === false || ++state.runs < options.afterExecutions) return false;
    if (operation.variableDefinitions?.length && getVariableValues(args.schema, operation.variableDefinitions, args.variableValues ?? {}).errors) return false;
    if (state.compiled === undefined) {
      const result = compileQuery(args.schema, args.document, args.operationName ?? undefined);
      state.compiled = isCompiledQuery(result) ? (result as unknown as Compiled) : false;
      const text = getDocumentString(args.document);
      if (state.compiled && text !== undefined) byText.set(text, state.compiled);
    }
    // The document text is the plugin's cache key; without one it would compile again, so don't.
    return state.compiled !== false && byText.has(getDocumentString(args.document) ?? '');
  };
  return {
    onPluginInit({ addPlugin }) {
      addPlugin(useGraphQlJit({}, { enableIf, cache: cache as unknown as NonNullable<Parameters<typeof useGraphQlJit>[1]>['cache'] }) as Plugin);
    },
    // graphql-jit's errors carry their locations but no source positions, which yoga needs to
    // keep them when it serialises; they are given theirs back from the document's source.
    onExecute({ args }) {
      const source = args.document.loc?.source;
      if (source === undefined) return undefined;
      return {
        onExecuteDone: (payload) =>
          handleStreamOrSingleExecutionResult(payload, ({ result, setResult }) => {
            if (!result.errors?.some((error) => error.locations !== undefined && error.positions === undefined)) return;
            setResult({ ...result, errors: result.errors.map((error) => withPositions(error, source)) });
          }),
      };
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
