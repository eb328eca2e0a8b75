import { parse } from 'graphql';
import type { Strategy } from '../../src/domain/needs.js';
import { type OperationPlan, Planner } from '../../src/plan/operation-plan.js';
import { schema } from '../../src/schema/index.js';

const planners: Record<Strategy, Planner> = {
  selection: new Planner({ schema, strategy: 'selection' }),
  plain: new Planner({ schema, strategy: 'plain' }),
};

/** The plan the gateway makes for an operation (the planner on unless `strategy` says otherwise). */
export function planOf(
  query: string,
  variables: Record<string, unknown> = {},
  options: { strategy?: Strategy; operationName?: string | undefined; authorized?: boolean } = {},
): OperationPlan {
  return planners[options.strategy ?? 'selection'].plan({
    document: parse(query),
    operationName: options.operationName,
    variables,
    authorized: options.authorized ?? false,
  });
}
