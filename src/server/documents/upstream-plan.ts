import type { Context } from '@opentelemetry/api';
import { SpanStatusCode } from '@opentelemetry/api';
import { type DocumentNode, GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { OperationPlan, Planner } from '../../plan/operation-plan.js';
import { type ContextOptions, createContext } from '../../schema/context.js';
import { carriesToken } from '../../schema/inputs.js';
import { spanAttributes, type Tracing } from '../../telemetry/tracing.js';
import type { PreparedOperationState } from '../operation-state.js';
import type { OperationStep, Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';

export interface UpstreamPlanOptions {
  readonly planner: Planner;
  /** Upstream calls one request (one operation, or a whole batch) may make. */
  readonly budget: number;
  /** List entries one request's answer may hold (MAX_RESULT_ITEMS). */
  readonly maxItems: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: (limit: 'budget' | 'items') => void;
  /** The plan's span, under the operation's; only when spans are recorded. */
  readonly tracing?: Tracing;
}

type Planned = { readonly calls: number; readonly items: number };
/** What the operations of a request admitted before this one plan to cost (zero outside a batch). */
const NOTHING_PLANNED: Planned = Object.freeze({ calls: 0, items: 0 });
const OVER = { budget: 'over the upstream call budget', items: 'over the result items limit' } as const;

/** The refusal of a plan over a limit, or undefined when it fits beside what its batch already planned. */
function refusalOf(plan: OperationPlan, planned: Planned, budget: number, maxItems: number) {
  const besides = (spent: number, what: string) =>
    spent === 0 ? '' : ` (its batch's other operations already plan ${spent} ${what})`;
  if (planned.calls + plan.calls > budget) {
    const cost = plan.exact ? `would cost ${plan.calls}` : `could cost up to ${plan.calls}`;
    return createGraphQLError(
      `This operation ${cost} upstream calls${besides(planned.calls, 'calls')}; the budget is ${budget}. Ask for fewer items or fields.`,
      { extensions: { code: 'UPSTREAM_BUDGET_EXCEEDED', limit: 'budget', estimatedCalls: plan.calls, budget } },
    );
  }
  if (planned.items + plan.items > maxItems)
    return createGraphQLError(
      `This operation could answer ${plan.items} list items${besides(planned.items, 'items')}; the limit is ${maxItems}. Ask for smaller pages or fewer aliases.`,
      { extensions: { code: 'RESULT_TOO_LARGE', limit: 'items', estimatedItems: plan.items, maxItems } },
    );
  return undefined;
}

export interface PlannedOperation {
  readonly document: DocumentNode;
  readonly operationName: string | null | undefined;
  readonly variables: Record<string, unknown> | null | undefined;
  /** Its request carries a token: calls that need one are planned. */
  readonly authorized: boolean;
  /** Its span's context, the plan span's parent. */
  readonly trace: Context | undefined;
}

/** Plans an operation, or refuses it (counted, its span marked): the caller answers it as its only error. */
export type PlanAdmission = (operation: PlannedOperation, batch: RequestState['batch']) => OperationPlan | GraphQLError;

/**
 * Plans the upstream calls (`plan/operation-plan.ts`), refused with zero calls past a limit a batch shares. Calls past
 * the budget anyway (retries, reads the plan could only bound) are refused by the operation's guard, same code.
 */
export function planAdmission(options: UpstreamPlanOptions): PlanAdmission {
  const { planner, budget, maxItems } = options;
  const tracer = options.tracing?.recording === true ? options.tracing.tracer : undefined;
  return (operation, batch) => {
    const span = tracer?.startSpan('upstream plan', undefined, operation.trace);
    const { document, operationName, authorized } = operation;
    const plan = planner.plan({ document, operationName, variables: operation.variables ?? undefined, authorized });
    const refusal = refusalOf(plan, batch?.planned ?? NOTHING_PLANNED, budget, maxItems);
    const limit = refusal?.extensions.limit as keyof typeof OVER | undefined;
    if (span !== undefined) {
      span.setAttributes({ [spanAttributes.planCalls]: plan.calls, [spanAttributes.planExact]: plan.exact });
      if (limit !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: OVER[limit] });
      span.end();
    }
    if (refusal !== undefined) {
      options.onRefused?.(limit!);
      return refusal;
    }
    if (batch !== undefined) {
      batch.planned.calls += plan.calls;
      batch.planned.items += plan.items;
    }
    return plan;
  };
}

/** The plan stage's policy, events' too: the plan or its refusal, then the context that hands it to the resolvers. */
export function useUpstreamPlan(admit: PlanAdmission, contextOptions: ContextOptions): Policy {
  const step: OperationStep<PreparedOperationState> = (operation) => {
    const { request } = operation;
    const { operationName, variables } = operation.params;
    const trace = operation.record?.trace;
    const authorized = carriesToken({ authorization: request.headers.get('authorization') ?? undefined });
    const plan = admit({ document: operation.document, operationName, variables, authorized, trace }, request.batch);
    if (plan instanceof GraphQLError) return plan;
    operation.plan = plan;
    const { requestId, batch } = request;
    operation.context = createContext(request.incoming, contextOptions, { requestId, batch, trace, plan });
    return undefined;
  };
  return { name: 'upstream plan', concerns: 'also events', plan: step };
}
