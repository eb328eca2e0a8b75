import { EnvelopArmorPlugin } from '@escape.tech/graphql-armor';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import type { Plugin } from 'graphql-yoga';
import type { OperationLimits } from '../config.js';

export interface OperationLimitsOptions {
  readonly limits: OperationLimits;
  /** Serve introspection queries. @default true */
  readonly introspection?: boolean;
  /** Hide "Did you mean …?" field suggestions, which map the schema for an attacker. @default false */
  readonly hideSuggestions?: boolean;
  /** Told of every refusal, with the limit's name, for metrics. */
  readonly onRefused?: (limit: string) => void;
}

/**
 * Refuses hostile or careless documents before execution, so they cost no upstream call:
 * GraphQL Armor's depth, alias, token and directive limits (each refusal a GraphQL error with
 * code BAD_USER_INPUT... as Armor words it, mapped by the error edge), introspection when turned
 * off, and CSRF protection for browser requests that skip the CORS preflight.
 */
export function useOperationLimits(options: OperationLimitsOptions): Plugin[] {
  const { limits } = options;
  const refused = (limit: string) => [() => options.onRefused?.(limit)];
  const plugins: Plugin[] = [
    EnvelopArmorPlugin({
      maxDepth: { n: limits.maxDepth, ignoreIntrospection: false, flattenFragments: true, onReject: refused('depth') },
      maxAliases: { n: limits.maxAliases, onReject: refused('aliases') },
      maxTokens: { n: limits.maxTokens, onReject: refused('tokens') },
      maxDirectives: { n: limits.maxDirectives, onReject: refused('directives') },
      // The upstream call budget is this gateway's cost measure (plugins/upstream-budget.ts).
      costLimit: { enabled: false },
      blockFieldSuggestion: { enabled: options.hideSuggestions ?? false },
    }) as Plugin,
    useCSRFPrevention({ requestHeaders: ['x-graphql-csrf', 'x-graphql-yoga-csrf'] }),
  ];
  if (options.introspection === false) plugins.push(useDisableIntrospection());
  return plugins;
}
