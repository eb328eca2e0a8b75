import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import { GraphQLError, type ValidationContext } from 'graphql';
import { createGraphQLError, handleStreamOrSingleExecutionResult, type Plugin } from 'graphql-yoga';
import { composed } from '../plugin-kit/composed.js';
import { withRecodedErrors } from '../plugin-kit/recoded-errors.js';
import { useFragmentPairsLimit } from './fragment-pairs.js';
import { useRepeatedFieldsLimit } from './repeated-fields.js';
import { suggestion, withoutLiterals } from '../../schema/errors.js';
import type { OperationLimits } from '../../config.js';

export interface OperationLimitsOptions {
  readonly limits: OperationLimits;
  /** Serve introspection queries. @default true */
  readonly introspection?: boolean;
  /** Hide "Did you mean …?" field suggestions, which map the schema for an attacker. @default false */
  readonly hideSuggestions?: boolean;
  /** Refuse browser-style requests without a preflight header (CSRF_PREVENTION). @default false */
  readonly csrfPrevention?: boolean;
  /** Told of every refusal, with the limit's name, for metrics. */
  readonly onRefused?: (limit: string) => void;
}

/** The limits Armor checks while validating; a refusal is a validation error naming it. */
type ValidationLimit = 'depth' | 'aliases' | 'directives';

/**
 * Armor's rules throw their refusal out of `validate` by default: yoga then answers 200 with an
 * error that has no code. Reported to the validation context instead, the refusal is an ordinary
 * validation error: HTTP 400, `GRAPHQL_VALIDATION_FAILED`, and `extensions.limit` says which.
 */
const reportRefusal = (limit: ValidationLimit) => (context: ValidationContext | null, error: GraphQLError) => {
  context?.reportError(new GraphQLError(error.message.replace(/^Syntax Error: /, ''), { extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit } }));
};

const withoutSuggestion = <E extends Error>(error: E): E => {
  const hidden = error.message.replace(suggestion, '').trim();
  if (hidden !== error.message) error.message = hidden;
  return error;
};

/**
 * Variable errors graphql-js raises as execution starts lose their "Did you mean …?" too, with
 * suggestions hidden (validation errors lose theirs in useValidationErrors).
 */
function useHiddenExecutionSuggestions(): Plugin {
  return {
    onExecute: () => ({
      onExecuteDone: (payload) =>
        handleStreamOrSingleExecutionResult(payload, ({ result }) => {
          result.errors?.forEach(withoutSuggestion);
        }),
    }),
  };
}

/** Nesting beyond the selection depth limit that lists, objects, arguments and inline fragments may add. */
const EXTRA_NESTING = 96;
const BLOCK_QUOTE = '"""';

/**
 * Whether a document nests `{`, `[` and `(` (outside strings and comments) more than `limit`
 * deep. graphql-js parses recursively: some 2,000 nested lists overflow its stack before Armor's
 * token count stops it, and the client saw INTERNAL_SERVER_ERROR. One pass over the text.
 */
function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 123 /* { */ || c === 91 /* [ */ || c === 40 /* ( */) {
      if (++depth > limit) return true;
    } else if (c === 125 || c === 93 || c === 41) depth--;
    else if (c === 35 /* # */) {
      while (i + 1 < text.length && text.charCodeAt(i + 1) !== 10 && text.charCodeAt(i + 1) !== 13) i++;
    } else if (c === 34 /* " */) {
      if (text.startsWith(BLOCK_QUOTE, i)) {
        // A block string ends at the first triple quote not escaped with a backslash.
        let end = text.indexOf(BLOCK_QUOTE, i + 3);
        while (end > 0 && text.charCodeAt(end - 1) === 92) end = text.indexOf(BLOCK_QUOTE, end + 3);
        if (end < 0) return false;
        i = end + 2;
      } else {
        for (i++; i < text.length && text.charCodeAt(i) !== 34 && text.charCodeAt(i) !== 10; i++) if (text.charCodeAt(i) === 92) i++;
      }
    }
  }
  return false;
}

/** Refuses a document nested deeper than any the other limits let through, before it is parsed. */
function useNestingLimit(limit: number, onRefused: (limit: string) => void): Plugin {
  return {
    onParams({ params }) {
      if (typeof params.query !== 'string' || !nestsDeeperThan(params.query, limit)) return;
      onRefused('nesting');
      throw createGraphQLError(`Document nested more than ${limit} levels deep`, { extensions: { code: 'GRAPHQL_PARSE_FAILED', limit: 'nesting', http: { status: 400 } } });
    },
  };
}

/**
 * One pass over a document's validation errors, as validation ends:
 * - each refusal of a limit (`extensions.limit`) is counted, here rather than in Armor's
 *   callbacks: a cached validation result runs no rule;
 * - an error about a literal argument names its type, not the literal (schema/errors.ts);
 * - with suggestions hidden, every "Did you mean …?" is cut (fields, arguments, types, inline
 *   fragments, enum values, input fields; Armor's own blocker only masks the `Did you mean "x"` form).
 */
function useValidationErrors(onRefused: (limit: string) => void, hideSuggestions: boolean): Plugin {
  return {
    onValidate: () => ({ valid, result, setResult }) => {
      if (valid) return;
      for (const error of result) {
        if (typeof error.extensions.limit === 'string') onRefused(error.extensions.limit);
        if (error instanceof GraphQLError) withoutLiterals(error);
      }
      if (hideSuggestions) setResult(result.map(withoutSuggestion));
    },
  };
}

/**
 * Any one of these lets a GET (or a form-typed POST) through the CSRF check: ours and yoga's, and
 * the two Apollo Client sends (`apollo-require-preflight`, `x-apollo-operation-name`).
 */
export const csrfHeaders = ['x-graphql-csrf', 'x-graphql-yoga-csrf', 'apollo-require-preflight', 'x-apollo-operation-name'] as const;

const csrfRefusal = `A GET, or a POST with a form or text/plain content type, must carry one of the headers ${csrfHeaders.join(', ')} (any value), or Content-Type: application/json.`;

/**
 * yoga's CSRF check (which answers a bare 403 "Required CSRF header(s) not present"), its refusal
 * naming what would pass: HTTP 403, code `BAD_REQUEST`.
 */
function useCSRFCheck(): Plugin {
  return withRecodedErrors(useCSRFPrevention({ requestHeaders: [...csrfHeaders] }) as Plugin, 'onRequestParse', (error) =>
    error.extensions.code === undefined ? createGraphQLError(csrfRefusal, { extensions: { ...error.extensions, code: 'BAD_REQUEST' } }) : undefined,
  );
}

/**
 * Refuses hostile or careless documents before execution, so they cost no upstream call:
 * - GraphQL Armor's depth, alias and directive limits: HTTP 400, a validation error with code
 *   `GRAPHQL_VALIDATION_FAILED` and `extensions.limit` (`depth`, `aliases`, `directives`).
 *   Depth counts field levels; fragments (inline or named) add none, introspection counts
 *   (GraphiQL's introspection query is 15 deep).
 * - Armor's token limit, checked while parsing: HTTP 400, code `GRAPHQL_PARSE_FAILED`,
 *   `extensions.limit: "tokens"`.
 * - introspection when turned off: HTTP 400, `GRAPHQL_VALIDATION_FAILED` (yoga's rule).
 * - CSRF, when `csrfPrevention` is on: a GET, or a POST with a form or text/plain content type,
 *   carrying none of the headers a browser cannot send cross-origin without a CORS preflight
 *   (`csrfHeaders`) and no other content type: HTTP 403, code `BAD_REQUEST`, naming the headers.
 * - field suggestions, when hidden: "Did you mean …?" is cut from every message.
 */
export function useOperationLimits(options: OperationLimitsOptions): Plugin {
  const { limits } = options;
  const onRefused = (limit: string) => options.onRefused?.(limit);
  const plugins: Plugin[] = [
    useNestingLimit(limits.maxDepth + EXTRA_NESTING, onRefused),
    useRepeatedFieldsLimit({ max: limits.maxRepeatedFields }),
    useFragmentPairsLimit({ max: limits.maxFragmentPairs, onRefused: () => onRefused('fragments') }),
    EnvelopArmorPlugin({
      maxDepth: { n: limits.maxDepth, ignoreIntrospection: false, flattenFragments: true, propagateOnRejection: false, onReject: [reportRefusal('depth')] },
      // `__typename` aliases count too (Armor exempts them by default): 640 of them in 10 KB made an 885 KB answer.
      maxAliases: { n: limits.maxAliases, allowList: [], propagateOnRejection: false, onReject: [reportRefusal('aliases')] },
      maxDirectives: { n: limits.maxDirectives, propagateOnRejection: false, onReject: [reportRefusal('directives')] },
      // Thrown while parsing (it must be: parsing would go on otherwise); yoga gives it
      // GRAPHQL_PARSE_FAILED and 400.
      maxTokens: {
        n: limits.maxTokens,
        onReject: [
          (_, error) => {
            Object.assign(error.extensions, { code: 'GRAPHQL_PARSE_FAILED', limit: 'tokens' });
            onRefused('tokens');
          },
        ],
      },
      // The upstream call budget is this gateway's cost measure (documents/upstream-plan.ts).
      costLimit: { enabled: false },
      blockFieldSuggestion: { enabled: false },
    }) as Plugin,
    useValidationErrors(onRefused, options.hideSuggestions ?? false),
  ];
  if (options.csrfPrevention ?? false) plugins.push(useCSRFCheck());
  if (options.hideSuggestions ?? false) plugins.push(useHiddenExecutionSuggestions());
  if (options.introspection === false) plugins.push(useDisableIntrospection());
  return composed(plugins);
}
