import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { GatewayContext } from '../context.js';
import type { Planner } from '../plan/operation-plan.js';
import { carriesToken } from '../schema/inputs.js';

export interface UpstreamPlanOptions {
  readonly planner: Planner;
  /** Upstream calls one operation may make. */
  readonly budget: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

/**
 * Plans the operation's upstream calls before execution (`plan/operation-plan.ts`) and hands the
 * plan to its resolvers. An operation whose plan costs more calls than the budget is refused with
 * zero calls (code UPSTREAM_BUDGET_EXCEEDED, with `estimatedCalls` and `budget`). Calls execution
 * makes past the budget anyway (retries, reads the plan could only bound) are refused by the
 * operation's guard as they come, with the same code.
 */
export function useUpstreamPlan(options: UpstreamPlanOptions): Plugin {
  const { planner, budget } = options;
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const context = args.contextValue as unknown as GatewayContext;
      const plan = planner.plan({
        document: args.document,
        operationName: args.operationName,
        variables: args.variableValues as Record<string, unknown> | undefined,
        authorized: carriesToken(context),
      });
      if (plan.calls <= budget) {
        context.plan = plan;
        return;
      }
      options.onRefused?.();
      const cost = plan.exact ? `would cost ${plan.calls}` : `could cost up to ${plan.calls}`;
      setResultAndStopExecution({
        errors: [
          createGraphQLError(`This operation ${cost} upstream calls; the budget is ${budget}. Ask for fewer items or fields.`, {
            extensions: { code: 'UPSTREAM_BUDGET_EXCEEDED', estimatedCalls: plan.calls, budget },
          }),
        ],
      });
    },
  };
}
