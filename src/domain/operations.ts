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

/**
 * The operations the contract says require a bearer token (4.1 Delete Head, 4.2 Get Permissions):
 * a 2xx answer to one is the upstream accepting the caller's token (the others may not check it).
 */
export const tokenCheckingOperations: ReadonlySet<OperationName> = new Set<OperationName>([
  'deleteHead',
  'getPermissions',
]);
