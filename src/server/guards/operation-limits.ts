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

/** Armor throws refusals out of `validate`, codeless: reported instead, each is a validation error naming its limit. */
const refusedAs = (limit: 'depth' | 'aliases' | 'directives') => ({
  propagateOnRejection: false,
  onReject: [
    (context: ValidationContext | null, error: GraphQLError) =>
      context?.reportError(
        new GraphQLError(error.message.replace(/^Syntax Error: /, ''), {
          extensions: { code: 'GRAPHQL_VALIDATION_FAILED', limit },
        }),
      ),
  ],
});

const withoutSuggestion = <E extends Error>(error: E): E => {
  const hidden = error.message.replace(suggestion, '').trim();
  if (hidden !== error.message) error.message = hidden;
  return error;
};

/** Errors name a literal's type, not the literal; hidden suggestions cut every "Did you mean …?" (Armor: one form). */
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

const noIntrospection: EnvelopPlugin = {
  onValidate: ({ addValidationRule }) => addValidationRule(NoSchemaIntrospectionCustomRule),
};

/** Run once per text as it is parsed and validated (documents/prepared.ts): a refused one costs no upstream call. */
export function documentPolicies(options: OperationLimitsOptions): EnvelopPlugin[] {
  const { limits } = options;
  return [
    useRepeatedFieldsLimit({ max: limits.maxRepeatedFields }),
    EnvelopArmorPlugin({
      // Field levels: fragments add none, introspection counts (GraphiQL's query is 15 deep).
      maxDepth: { n: limits.maxDepth, ignoreIntrospection: false, flattenFragments: true, ...refusedAs('depth') },
      // `__typename` aliases count too (Armor exempts them by default): 640 of them in 10 KB made an 885 KB answer.
      maxAliases: { n: limits.maxAliases, allowList: [], ...refusedAs('aliases') },
      maxDirectives: { n: limits.maxDirectives, ...refusedAs('directives') },
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
    ...(options.introspection === false ? [noIntrospection] : []),
  ];
}

/** Variable errors raised as execution starts lose their suggestions too, before the masking rewrites them. */
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

/** Any one lets a GET (or a form-typed POST) through the CSRF check: ours, yoga's and the two Apollo Client sends. */
export const csrfHeaders = [
  'x-graphql-csrf',
  'x-graphql-yoga-csrf',
  'apollo-require-preflight',
  'x-apollo-operation-name',
] as const;

const csrfRefusal = `A GET, or a POST with a form or text/plain content type, must carry one of the headers ${csrfHeaders.join(', ')} (any value), or Content-Type: application/json.`;

/** The content types a browser sends cross-origin without a CORS preflight (the fetch spec's CORS-safelisted). */
const unpreflighted = ['application/x-www-form-urlencoded', 'multipart/form-data', 'text/plain'];

/** CSRF_PREVENTION: @graphql-yoga/plugin-csrf-prevention's check, held to it by test/plugin-conformance.test.ts. */
export const csrfCheck: Policy = {
  name: 'csrf',
  intake(request) {
    const type = request.headers.get('content-type')?.toLowerCase();
    if (type && !unpreflighted.some((unsafe) => type.startsWith(unsafe))) return undefined;
    if (csrfHeaders.some((name) => request.headers.has(name))) return undefined;
    return createGraphQLError(csrfRefusal, { extensions: { code: 'BAD_REQUEST', http: { status: 403 } } });
  },
};
