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

const pairsOf = (n: number) => (n * (n - 1)) / 2;

export interface FragmentPairsOptions {
  /** Pairs of fragments a request's documents (a batch's together) may make graphql-js compare (MAX_FRAGMENT_PAIRS). */
  readonly max: number;
  readonly onRefused?: () => void;
}

/** The fragments spread in a selection set or its inline fragments and, in turn, in theirs (a cycle adds none). */
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

/** 135 fragments side by side took 30 ms to validate, a batch of ten 250 ms (docs/performance.md#measured-reasons). */
function fragmentPairsOf(document: DocumentNode): number {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  if (fragments.size < 2) return 0;
  const memo = new Map<string, ReadonlySet<string>>();
  let pairs = 0;
  visit(document, {
    SelectionSet(node) {
      pairs += pairsOf(mergedFragments(node, fragments, memo).size);
    },
  });
  return pairs;
}

/** A floor of `fragmentPairsOf` from the lexer alone (an object value's `{` holds no spread); 0 if it refuses. */
export function fragmentPairsFloor(text: string): number {
  const lexer = new Lexer(new Source(text));
  const open: Set<string>[] = [];
  let pairs = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      if (token.kind === TokenKind.BRACE_L) open.push(new Set());
      else if (token.kind === TokenKind.BRACE_R) pairs += pairsOf(open.pop()?.size ?? 0);
      else if (token.kind === TokenKind.SPREAD) {
        const next = lexer.lookahead();
        if (next.kind === TokenKind.NAME && next.value !== 'on') open.at(-1)?.add(next.value);
      }
    }
  } catch {
    return 0;
  }
  return pairs;
}

/** Tells `onRefused`, and words the refusal. */
const refuse = ({ max, onRefused }: FragmentPairsOptions, pairs: number, spent: number, atLeast: boolean) => {
  onRefused?.();
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

/** A batch's distinct documents share `max`; a refusal is not kept: one for what its batch spent is no one else's. */
export function fragmentPairsLimit(options: FragmentPairsOptions) {
  const { max } = options;
  const counted = new WeakMap<DocumentNode, number>();
  /** Before a new text is parsed (documents/prepared.ts): a floor over the request's budget costs only a lexing. */
  const beforeParse = (operation: OperationState, text: string): GraphQLError | undefined => {
    const left = max - operation.request.validationSpent.pairs;
    // Too few spreads (each, and each inline fragment, one `...`) to pass what is left, however placed: nothing to lex.
    if (pairsOf(text.split('...').length - 1) <= left) return undefined;
    const floor = fragmentPairsFloor(text);
    return floor <= left ? undefined : refuse(options, floor, max - left, true);
  };
  const step: OperationStep = (operation) => {
    const document = operation.prepared!.document;
    const pairs = counted.get(document) ?? fragmentPairsOf(document);
    counted.set(document, pairs);
    const spent = operation.request.validationSpent;
    if (pairs === 0 || spent.documents.has(document)) return undefined;
    if (spent.pairs + pairs > max) return refuse(options, pairs, spent.pairs, false);
    spent.pairs += pairs;
    spent.documents.add(document);
    return undefined;
  };
  return { beforeParse, step };
}
