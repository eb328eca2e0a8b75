import type { Plugin } from '@envelop/core';
import { BREAK, type DocumentNode, GraphQLError, Kind, type SelectionSetNode, visit } from 'graphql';

/** How often each response key appears in one selection set, inline fragments opened. */
function responseKeyCounts(selectionSet: SelectionSetNode, counts = new Map<string, number>()): Map<string, number> {
  for (const selection of selectionSet.selections) {
    if (selection.kind === Kind.FIELD) {
      const key = selection.alias?.value ?? selection.name.value;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) responseKeyCounts(selection.selectionSet, counts);
  }
  return counts;
}

function overLimit(document: DocumentNode, max: number): { key: string; count: number } | undefined {
  let found: { key: string; count: number } | undefined;
  visit(document, {
    SelectionSet(node) {
      for (const [key, count] of responseKeyCounts(node)) {
        if (count > max) {
          found = { key, count };
          return BREAK;
        }
      }
      return undefined;
    },
  });
  return found;
}

/** graphql-js compares repeats pairwise: 250 of a field (under 2,000 tokens) held the event loop half a second. */
export function useRepeatedFieldsLimit(options: { readonly max: number }): Plugin {
  const checked = new WeakMap<DocumentNode, GraphQLError | null>();
  return {
    onValidate({ params, setResult }) {
      const document = params.documentAST;
      let refusal = checked.get(document);
      if (refusal === undefined) {
        const over = overLimit(document, options.max);
        refusal = over
          ? new GraphQLError(
              `Field "${over.key}" appears ${over.count} times in one selection; the limit is ${options.max}.`,
              { extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit: 'repeats' } },
            )
          : null;
        checked.set(document, refusal);
      }
      if (refusal !== null) setResult([refusal]);
    },
  };
}
