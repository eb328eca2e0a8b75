import {
  type DocumentNode,
  type FragmentDefinitionNode,
  GraphQLError,
  Kind,
  Lexer,
  type SelectionSetNode,
  Source,
  TokenKind,
  visit,
} from 'graphql';
import type { OperationState } from '../operation-state.js';
import type { OperationStep } from '../pipeline/stages.js';

export interface FragmentPairsOptions {
  /**
   * Pairs of fragments one request's documents may make graphql-js compare (MAX_FRAGMENT_PAIRS): a batch's documents
   * share them.
   */
  readonly max: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * The fragments a selection set merges: those spread in it (directly or in its inline fragments)
 * and, transitively, those spread at the top of theirs; not those of its sub-selections, which are
 * selection sets of their own. Memoised per fragment; a cycle (refused by validation) adds nothing.
 */
function mergedFragments(
  selectionSet: SelectionSetNode,
  fragments: ReadonlyMap<string, FragmentDefinitionNode>,
  memo: Map<string, ReadonlySet<string>>,
  into = new Set<string>(),
): Set<string> {
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.INLINE_FRAGMENT) mergedFragments(selection.selectionSet, fragments, memo, into);
    else if (selection.kind === Kind.FRAGMENT_SPREAD) {
      const name = selection.name.value;
      if (into.has(name)) continue;
      into.add(name);
      let merged = memo.get(name);
      if (merged === undefined) {
        memo.set(name, new Set());
        const fragment = fragments.get(name);
        merged = fragment === undefined ? new Set<string>() : mergedFragments(fragment.selectionSet, fragments, memo);
        memo.set(name, merged);
      }
      for (const other of merged) into.add(other);
    }
  }
  return into;
}

/**
 * The pairs of distinct fragments graphql-js's OverlappingFieldsCanBeMerged rule compares in a
 * document: in each selection set (of its operations and of its fragments), every two of the
 * fragments it merges. Its cost grows with their square: 135 fragments spread side by side in one
 * selection set (9,045 pairs, a 100 KB document within every other limit) took 30 ms to
 * validate, a batch of ten of them 250 ms (docs/performance.md#measured-reasons).
 */
export function fragmentPairsOf(document: DocumentNode): number {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  if (fragments.size < 2) return 0;
  const memo = new Map<string, ReadonlySet<string>>();
  let pairs = 0;
  visit(document, {
    SelectionSet(node) {
      const merged = mergedFragments(node, fragments, memo).size;
      pairs += (merged * (merged - 1)) / 2;
    },
  });
  return pairs;
}

/** How many times `...` is in `text`: each fragment spread is one (an inline fragment too), so pairs need two. */
function spreadMarks(text: string): number {
  let marks = 0;
  for (let at = text.indexOf('...'); at !== -1; at = text.indexOf('...', at + 3)) marks++;
  return marks;
}

/**
 * A floor of `fragmentPairsOf(parse(text))`, from graphql-js's lexer alone (no AST built): in
 * each selection set, every two distinct fragments spread in it directly are a pair the rule
 * compares (what those fragments spread in turn, and inline fragments, only add). A `{` that opens
 * an object value holds no spread, so it adds nothing. Linear in the text; a text the lexer
 * refuses gives 0 (the parser words the refusal).
 */
export function fragmentPairsFloor(text: string): number {
  const lexer = new Lexer(new Source(text));
  const open: Set<string>[] = [];
  let pairs = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (token.kind === TokenKind.BRACE_L) open.push(new Set());
      else if (token.kind === TokenKind.BRACE_R) {
        const spread = open.pop()?.size ?? 0;
        pairs += (spread * (spread - 1)) / 2;
      } else if (token.kind === TokenKind.SPREAD) {
        const next = lexer.lookahead();
        if (next.kind === TokenKind.NAME && next.value !== 'on') open.at(-1)?.add(next.value);
      }
    }
  } catch {
    return 0;
  }
  return pairs;
}

const overLimit = (pairs: number, spent: number, max: number, atLeast: boolean) => {
  const besides = spent === 0 ? '' : ` (its batch's other documents already make ${spent})`;
  return new GraphQLError(
    `This document makes ${atLeast ? 'at least ' : ''}${pairs} pairs of fragments to compare${besides}; the limit is ${max}. Spread fewer fragments side by side in one selection.`,
    {
      extensions: {
        code: 'GRAPHQL_VALIDATION_FAILED',
        limit: 'fragments',
        fragmentPairs: pairs,
        maxFragmentPairs: max,
        http: { status: 400 },
      },
    },
  );
};

export interface FragmentPairsLimit {
  /**
   * Before a text not yet prepared is parsed (documents/prepared.ts): one whose floor of pairs
   * (`fragmentPairsFloor`) is over what its request has left is refused at once, for the cost of
   * lexing it, not of parsing it (not kept: another request has its own budget).
   */
  readonly beforeParse: (operation: OperationState, text: string) => GraphQLError | undefined;
  /** The document stage's step, between parsing and validation: the exact count. */
  readonly step: OperationStep;
}

/**
 * Bounds what validation costs before it is paid, a step of the document stage between parsing
 * and validation: a document whose fragments make more than `max` pairs to compare
 * (fragmentPairsOf) is refused before graphql-js's rules run, and the documents of one request (a
 * batch's) share the `max`, each distinct document counted once. The refusal reads as a validation
 * error (HTTP 400, `GRAPHQL_VALIDATION_FAILED`, `extensions.limit: "fragments"`, with the pairs it
 * would cost and the limit) but is not kept with the document: a document refused for what its
 * batch had spent is another request's to validate. Each document's count is kept beside it.
 */
export function fragmentPairsLimit(options: FragmentPairsOptions): FragmentPairsLimit {
  const { max } = options;
  const counted = new WeakMap<DocumentNode, number>();
  const beforeParse = (operation: OperationState, text: string): GraphQLError | undefined => {
    const left = max - operation.request.validationSpent.pairs;
    const marks = spreadMarks(text);
    // Too few spreads to pass what is left, however they are placed: nothing to lex.
    if ((marks * (marks - 1)) / 2 <= left) return undefined;
    const floor = fragmentPairsFloor(text);
    if (floor <= left) return undefined;
    options.onRefused?.();
    return overLimit(floor, max - left, max, true);
  };
  const step: OperationStep = (operation) => {
    const document = operation.prepared!.document;
    let pairs = counted.get(document);
    if (pairs === undefined) {
      pairs = fragmentPairsOf(document);
      counted.set(document, pairs);
    }
    if (pairs === 0) return undefined;
    const spent = operation.request.validationSpent;
    if (spent.documents.has(document)) return undefined;
    if (spent.pairs + pairs > max) {
      options.onRefused?.();
      return overLimit(pairs, spent.pairs, max, false);
    }
    spent.pairs += pairs;
    spent.documents.add(document);
    return undefined;
  };
  return { beforeParse, step };
}
