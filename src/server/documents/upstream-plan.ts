import type { Context } from '@opentelemetry/api';
import { SpanStatusCode } from '@opentelemetry/api';
import { type DocumentNode, GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { OperationPlan, Planner } from '../../plan/operation-plan.js';
import { type ContextOptions, createContext } from '../../schema/context.js';
import { carriesToken } from '../../schema/inputs.js';
import { spanAttributes, type Tracing } from '../../telemetry/tracing.js';
import type { OperationStep, Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';

export interface UpstreamPlanOptions {
  readonly planner: Planner;
  /** Upstream calls one request (one operation, or a whole batch) may make. */
  readonly budget: number;
  /** List entries one request's answer may hold (MAX_RESULT_ITEMS). */
  readonly maxItems: number;
  /** Told of every refusal with the limit's name (`budget`, `items`), for metrics. */
  readonly onRefused?: (limit: 'budget' | 'items') => void;
  /** The plan's span, under the operation's; only when spans are recorded (nothing else needs it). */
  readonly tracing?: Tracing;
}

/** What the operations of a request admitted before this one plan to cost (zero outside a batch). */
const NOTHING_PLANNED = Object.freeze({ calls: 0, items: 0 });

/** The refusal of a plan over a limit, or undefined when it fits beside what its batch already planned. */
function refusalOf(
  plan: OperationPlan,
  planned: { readonly calls: number; readonly items: number },
  budget: number,
  maxItems: number,
) {
  const besides = (spent: number, what: string) =>
    spent === 0 ? '' : ` (its batch's other operations already plan ${spent} ${what})`;
  if (planned.calls + plan.calls > budget) {
    const cost = plan.exact ? `would cost ${plan.calls}` : `could cost up to ${plan.calls}`;
    return createGraphQLError(
      `This operation ${cost} upstream calls${besides(planned.calls, 'calls')}; the budget is ${budget}. Ask for fewer items or fields.`,
      {
        extensions: { code: 'UPSTREAM_BUDGET_EXCEEDED', limit: 'budget', estimatedCalls: plan.calls, budget },
      },
    );
  }
  if (planned.items + plan.items > maxItems) {
    return createGraphQLError(
      `This operation could answer ${plan.items} list items${besides(planned.items, 'items')}; the limit is ${maxItems}. Ask for smaller pages or fewer aliases.`,
      {
        extensions: { code: 'RESULT_TOO_LARGE', limit: 'items', estimatedItems: plan.items, maxItems },
      },
    );
  }
  return undefined;
}

/** What the plan of an operation is given. */
export interface PlannedOperation {
  readonly document: DocumentNode;
  readonly operationName: string | null | undefined;
  readonly variables: Record<string, unknown> | null | undefined;
  /** Its request carries a token: calls that need one are planned. */
  readonly authorized: boolean;
  /** Its span's context: the plan's span hangs under it. */
  readonly trace: Context | undefined;
}

/**
 * Plans an operation, or refuses it: the refusal is counted and its span marked, and the caller
 * answers it as the operation's only error.
 */
export type PlanAdmission = (operation: PlannedOperation, batch: RequestState['batch']) => OperationPlan | GraphQLError;

/**
 * Plans the operation's upstream calls before execution (`plan/operation-plan.ts`) and hands the
 * plan to its resolvers. An operation whose plan costs more calls than the budget is refused with
 * zero calls (code UPSTREAM_BUDGET_EXCEEDED, `limit: "budget"`, with `estimatedCalls` and
 * `budget`); one whose answer could hold more list entries than `maxItems` likewise (code
 * RESULT_TOO_LARGE, `limit: "items"`, with `estimatedItems` and `maxItems`). The operations of a
 * batch share both: each is admitted while what it plans fits beside what those admitted before
 * it plan, in the order they reach execution (the batch's order). Calls execution makes past
 * the budget anyway (retries, reads the plan could only bound) are refused by the operation's
 * guard as they come, with the same code.
 */
export function planAdmission(options: UpstreamPlanOptions): PlanAdmission {
  const { planner, budget, maxItems } = options;
  const tracer = options.tracing?.recording === true ? options.tracing.tracer : undefined;
  return (operation, batch) => {
    const span = tracer?.startSpan('upstream plan', undefined, operation.trace);
    const plan = planner.plan({
      document: operation.document,
      operationName: operation.operationName,
      variables: operation.variables ?? undefined,
      authorized: operation.authorized,
    });
    const refusal = refusalOf(plan, batch?.planned ?? NOTHING_PLANNED, budget, maxItems);
    if (span !== undefined) {
      span.setAttribute(spanAttributes.planCalls, plan.calls);
      span.setAttribute(spanAttributes.planExact, plan.exact);
      if (refusal !== undefined)
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message:
            refusal.extensions.limit === 'items' ? 'over the result items limit' : 'over the upstream call budget',
        });
      span.end();
    }
    if (refusal === undefined) {
      if (batch !== undefined) {
        batch.planned.calls += plan.calls;
        batch.planned.items += plan.items;
      }
      return plan;
    }
    options.onRefused?.(refusal.extensions.limit as 'budget' | 'items');
    return refusal;
  };
}

/**
 * The plan stage's policy, a subscription's events' too: the operation's plan, or its refusal
 * (planAdmission); then its context (schema/context.ts: its loaders, its guard, the upstream bound
 * to its caller), which hands the plan to its resolvers.
 */
export function useUpstreamPlan(admit: PlanAdmission, contextOptions: ContextOptions): Policy {
  const step: OperationStep = (operation) => {
    const { request, params } = operation;
    const trace = operation.record?.trace;
    const authorized = carriesToken({ authorization: request.headers.get('authorization') ?? undefined });
    const plan = admit(
      {
        document: operation.document!,
        operationName: params.operationName,
        variables: params.variables,
        authorized,
        trace,
      },
      request.batch,
    );
    if (plan instanceof GraphQLError) return plan;
    operation.plan = plan;
    operation.context = createContext(request.incoming, contextOptions, {
      requestId: request.requestId,
      batch: request.batch,
      trace,
      plan,
    });
    return undefined;
  };
  return { name: 'upstream plan', concerns: 'also events', plan: step };
}
