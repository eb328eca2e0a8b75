import { SpanStatusCode } from '@opentelemetry/api';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import type { GatewayContext } from '../context.js';
import type { Planner } from '../plan/operation-plan.js';
import { carriesToken } from '../schema/inputs.js';
import { spanAttributes, type Tracing } from '../tracing.js';

export interface UpstreamPlanOptions {
  readonly planner: Planner;
  /** Upstream calls one operation may make. */
  readonly budget: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
  /** The plan's span, under the operation's; only when spans are recorded (nothing else needs it). */
  readonly tracing?: Tracing;
}

/**
 * Plans the operation's upstream calls before execution (`plan/operation-plan.ts`) and hands the
 * plan to its resolvers. An operation whose plan costs more calls than the budget is refused with
 * zero calls (code UPSTREAM_BUDGET_EXCEEDED, `limit: "budget"`, with `estimatedCalls` and `budget`). Calls execution
 * makes past the budget anyway (retries, reads the plan could only bound) are refused by the
 * operation's guard as they come, with the same code.
 */
export function useUpstreamPlan(options: UpstreamPlanOptions): Plugin {
  const { planner, budget } = options;
  const tracer = options.tracing?.recording === true ? options.tracing.tracer : undefined;
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const context = args.contextValue as unknown as GatewayContext;
      const span = tracer?.startSpan('upstream plan', undefined, context.trace);
      const plan = planner.plan({
        document: args.document,
        operationName: args.operationName,
        variables: args.variableValues as Record<string, unknown> | undefined,
        authorized: carriesToken(context),
      });
      if (span !== undefined) {
        span.setAttribute(spanAttributes.planCalls, plan.calls);
        span.setAttribute(spanAttributes.planExact, plan.exact);
        if (plan.calls > budget) span.setStatus({ code: SpanStatusCode.ERROR, message: 'over the upstream call budget' });
        span.end();
      }
      if (plan.calls <= budget) {
        context.plan = plan;
        return;
      }
      options.onRefused?.();
      const cost = plan.exact ? `would cost ${plan.calls}` : `could cost up to ${plan.calls}`;
      setResultAndStopExecution({
        errors: [
          createGraphQLError(`This operation ${cost} upstream calls; the budget is ${budget}. Ask for fewer items or fields.`, {
            extensions: { code: 'UPSTREAM_BUDGET_EXCEEDED', limit: 'budget', estimatedCalls: plan.calls, budget },
          }),
        ],
      });
    },
  };
}
