/**
 * The operations of the Avatar Head Service contract, by the names the gateway gives them: the
 * route table (upstream/routes.ts), the plan, the metrics and the reference upstream all use these.
 */
export const operationNames = [
  'listHeads',
  'getHeadExt',
  'updateHead',
  'deleteHead',
  'listHeadsExt',
  'getHeadById',
  'getHeadExtById',
  'getPermissions',
  'updateSubscription',
  'login',
] as const;

export type OperationName = (typeof operationNames)[number];
