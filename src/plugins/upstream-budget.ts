import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { GatewayContext } from '../context.js';
import { estimateUpstreamCalls } from '../schema/upstream-cost.js';

export interface UpstreamBudgetOptions {
  /** Upstream calls one operation may make. @default 50 */
  readonly budget?: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * Refuses, before execution and with zero upstream calls, an operation whose estimated upstream
 * calls exceed the budget (code UPSTREAM_BUDGET_EXCEEDED, with `estimatedCalls` and `budget`).
 * The estimate counts the read plan the operation's context will use (`planner`). Calls that
 * execution makes past the budget anyway (retries, which the estimate leaves out) are refused by
 * the operation's guard as they come, with the same code.
 */
export function useUpstreamCallBudget(options: UpstreamBudgetOptions = {}): Plugin {
  const budget = options.budget ?? 50;
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const planner = (args.contextValue as Partial<GatewayContext> | undefined)?.planner === true;
      const estimate = estimateUpstreamCalls(args.document, args.operationName, (args.variableValues ?? {}) as Record<string, unknown>, { planner });
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
