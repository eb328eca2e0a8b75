import type { Plugin as EnvelopPlugin } from '@envelop/core';
import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { type ExecutionResult, GraphQLError, NoSchemaIntrospectionCustomRule, type ValidationContext } from 'graphql';
import { createGraphQLError, isAsyncIterable, mapAsyncIterator } from 'graphql-yoga';
import type { OperationLimits } from '../../config.js';
import { suggestion, withoutLiterals } from '../../schema/errors.js';
import type { Policy } from '../pipeline/stages.js';
import { useRepeatedFieldsLimit } from './repeated-fields.js';

export interface OperationLimitsOptions {
  readonly limits: OperationLimits;
  /** Serve introspection queries. @default true */
  readonly introspection?: boolean;
  /** Hide "Did you mean …?" field suggestions, which map the schema for an attacker. @default false */
  readonly hideSuggestions?: boolean;
}

/** The limits Armor checks while validating; a refusal is a validation error naming it. */
type ValidationLimit = 'depth' | 'aliases' | 'directives';

/**
 * Armor's rules throw their refusal out of `validate` by default: it would have no code. Reported
 * to the validation context instead, the refusal is an ordinary validation error: HTTP 400,
 * `GRAPHQL_VALIDATION_FAILED`, and `extensions.limit` says which.
 */
const reportRefusal = (limit: ValidationLimit) => (context: ValidationContext | null, error: GraphQLError) => {
  context?.reportError(
    new GraphQLError(error.message.replace(/^Syntax Error: /, ''), {
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit },
    }),
  );
};

const withoutSuggestion = <E extends Error>(error: E): E => {
  const hidden = error.message.replace(suggestion, '').trim();
  if (hidden !== error.message) error.message = hidden;
  return error;
};

/**
 * A document's validation errors, as validation ends (kept with the document, documents/prepared.ts):
 * an error about a literal argument names its type, not the literal (schema/errors.ts); with
 * suggestions hidden, every "Did you mean …?" is cut (fields, arguments, types, inline fragments,
 * enum values, input fields; Armor's own blocker only masks the `Did you mean "x"` form).
 */
function useValidationErrors(hideSuggestions: boolean): EnvelopPlugin {
  return {
    onValidate:
      () =>
      ({ valid, result, setResult }) => {
        if (valid) return;
        for (const error of result) if (error instanceof GraphQLError) withoutLiterals(error);
        if (hideSuggestions) setResult(result.map(withoutSuggestion));
      },
  };
}

/** Introspection turned off: graphql-js's rule refuses `__schema` and `__type` as a validation error. */
const noIntrospection: EnvelopPlugin = {
  onValidate: ({ addValidationRule }) => addValidationRule(NoSchemaIntrospectionCustomRule),
};

/**
 * The document policies, envelop plugins run as a document is parsed and validated (once per
 * text: documents/prepared.ts), so a refused document costs no upstream call:
 * - GraphQL Armor's depth, alias and directive limits: a validation error with code
 *   `GRAPHQL_VALIDATION_FAILED` and `extensions.limit` (`depth`, `aliases`, `directives`). Depth
 *   counts field levels; fragments (inline or named) add none, introspection counts (GraphiQL's
 *   introspection query is 15 deep).
 * - Armor's token limit, checked while parsing: code `GRAPHQL_PARSE_FAILED`, `extensions.limit: "tokens"`.
 * - repeated fields (guards/repeated-fields.ts), introspection when turned off, and the
 *   validation errors' wording (no literal, no suggestion where hidden).
 */
export function documentPolicies(options: OperationLimitsOptions): EnvelopPlugin[] {
  const { limits } = options;
  const plugins: EnvelopPlugin[] = [
    useRepeatedFieldsLimit({ max: limits.maxRepeatedFields }),
    EnvelopArmorPlugin({
      maxDepth: {
        n: limits.maxDepth,
        ignoreIntrospection: false,
        flattenFragments: true,
        propagateOnRejection: false,
        onReject: [reportRefusal('depth')],
      },
      // `__typename` aliases count too (Armor exempts them by default): 640 of them in 10 KB made an 885 KB answer.
      maxAliases: {
        n: limits.maxAliases,
        allowList: [],
        propagateOnRejection: false,
        onReject: [reportRefusal('aliases')],
      },
      maxDirectives: { n: limits.maxDirectives, propagateOnRejection: false, onReject: [reportRefusal('directives')] },
      // Thrown while parsing (it must be: parsing would go on otherwise).
      maxTokens: {
        n: limits.maxTokens,
        onReject: [
          (_, error) => void Object.assign(error.extensions, { code: 'GRAPHQL_PARSE_FAILED', limit: 'tokens' }),
        ],
      },
      // The upstream call budget is this gateway's cost measure (documents/upstream-plan.ts).
      costLimit: { enabled: false },
      blockFieldSuggestion: { enabled: false },
    }) as EnvelopPlugin,
    useValidationErrors(options.hideSuggestions ?? false),
  ];
  if (options.introspection === false) plugins.push(noIntrospection);
  return plugins;
}

/**
 * Variable errors graphql-js raises as execution starts lose their "Did you mean …?" too, with
 * suggestions hidden (validation errors lose theirs as they are made): a result step, before the
 * masking (which rewrites a refused variable's error from what it leaves).
 */
export const hiddenExecutionSuggestions: Policy = {
  name: 'hidden suggestions',
  concerns: 'also events',
  result(operation) {
    const strip = (result: ExecutionResult) => {
      result.errors?.forEach(withoutSuggestion);
      return result;
    };
    const { result } = operation;
    if (result === undefined) return;
    if (isAsyncIterable(result)) operation.result = mapAsyncIterator(result, strip);
    else strip(result);
  },
};

/**
 * Any one of these lets a GET (or a form-typed POST) through the CSRF check: ours and yoga's, and
 * the two Apollo Client sends (`apollo-require-preflight`, `x-apollo-operation-name`).
 */
export const csrfHeaders = [
  'x-graphql-csrf',
  'x-graphql-yoga-csrf',
  'apollo-require-preflight',
  'x-apollo-operation-name',
] as const;

const csrfRefusal = `A GET, or a POST with a form or text/plain content type, must carry one of the headers ${csrfHeaders.join(', ')} (any value), or Content-Type: application/json.`;

/**
 * The content types a browser sends cross-origin without a CORS preflight (the fetch spec's CORS-safelisted request
 * types).
 */
const unpreflighted = ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'];

/**
 * CSRF_PREVENTION, an intake step: yoga's check (@graphql-yoga/plugin-csrf-prevention, a few lines,
 * owned here and held to it by test/plugin-conformance.test.ts): a request without a content type
 * (a GET), or with one a browser sends cross-origin without a CORS preflight, must carry one of
 * the headers a browser cannot send so (`csrfHeaders`); its refusal names what would pass: HTTP
 * 403, code `BAD_REQUEST`.
 */
export const csrfCheck: Policy = {
  name: 'csrf',
  intake(request) {
    const type = request.headers.get('content-type')?.toLowerCase();
    if (type && !unpreflighted.some((unsafe) => type.startsWith(unsafe))) return undefined;
    if (csrfHeaders.some((name) => request.headers.has(name))) return undefined;
    return createGraphQLError(csrfRefusal, { extensions: { code: 'BAD_REQUEST', http: { status: 403 } } });
  },
};
