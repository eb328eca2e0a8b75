import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { estimateUpstreamCalls } from '../schema/upstream-cost.js';

export interface UpstreamBudgetOptions {
  /** Upstream calls one operation may make. @default 50 */
  readonly budget?: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * Refuses, before execution and with zero upstream calls, an operation whose estimated upstream
 * calls exceed the budget. Calls that execution makes past the budget anyway (the estimate
 * cannot see everything, retries among them) are refused by the operation's guard as they come.
 */
export function useUpstreamCallBudget(options: UpstreamBudgetOptions = {}): Plugin {
  const budget = options.budget ?? 50;
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const estimate = estimateUpstreamCalls(args.document, args.operationName, (args.variableValues ?? {}) as Record<string, unknown>);
      if (estimate <= budget) return;
      options.onRefused?.();
      setResultAndStopExecution({
        errors: [
          createGraphQLError(`This operation could cost up to ${estimate} upstream calls; the budget is ${budget}. Ask for fewer items or fields.`, {
            extensions: { code: 'UPSTREAM_BUDGET_EXCEEDED', estimatedCalls: estimate, budget },
          }),
        ],
      });
    },
  };
}
