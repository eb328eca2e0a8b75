import type { GraphQLError } from 'graphql';

/* What an operation's log line, metrics and span say of it: pure rules over a result (operation-telemetry.ts). */

export type OperationOutcome = 'ok' | 'error' | 'refused';

/** Whose fault an operation's error is, when it is not its client's: what the availability SLO counts as bad. */
export type OperationFault = 'upstream' | 'gateway';

const faults: Readonly<Record<string, OperationFault>> = {
  UPSTREAM_TIMEOUT: 'upstream',
  UPSTREAM_UNAVAILABLE: 'upstream',
  UPSTREAM_ERROR: 'upstream',
  UPSTREAM_OUTCOME_UNKNOWN: 'upstream',
  INTERNAL_SERVER_ERROR: 'gateway',
  OVERLOADED: 'gateway',
};
export const operationFaults: readonly OperationFault[] = ['upstream', 'gateway'];

const MAX_NAME_LENGTH = 64;
const MAX_ERROR_CODES = 10;
const invalidNameChars = /[^A-Za-z0-9_]/g;

/** A name safe as a label and a log field: ASCII letters, digits and `_`, at most 64 of them. */
export function operationLabel(name: string | null | undefined): string {
  return name ? name.slice(0, MAX_NAME_LENGTH).replace(invalidNameChars, '_') : 'anonymous';
}

/** No `data` entry: never executed (spec, "Response Format"), but a masked crash is an `error`, not a bad request. */
export function outcomeOf(
  result: { errors?: readonly unknown[] | undefined; data?: unknown } | undefined,
): OperationOutcome {
  if (result === undefined) return 'refused';
  const { errors } = result;
  if (errors === undefined || errors.length === 0) return 'ok';
  if (result.data !== undefined) return 'error';
  return errors.some((error) => extension(error, 'code') === 'INTERNAL_SERVER_ERROR') ? 'error' : 'refused';
}

/** The fault among an operation's errors (README's error codes), the upstream's first; none if all are the client's. */
export function faultOf(errors: readonly unknown[] | undefined): OperationFault | undefined {
  let fault: OperationFault | undefined;
  for (const error of errors ?? []) {
    const found = faults[extension(error, 'code') ?? ''];
    if (found === 'upstream') return found;
    fault ??= found;
  }
  return fault;
}

/** An error's `extensions.code` or `extensions.limit`, when it is a string. */
function extension(error: unknown, name: 'code' | 'limit'): string | undefined {
  const value = (error as Partial<GraphQLError> | null)?.extensions?.[name];
  return typeof value === 'string' ? value : undefined;
}

/** The limit a refusal names in `extensions.limit` (the `limit` label of gateway_refusals_total). */
export function limitOf(errors: readonly unknown[] | undefined): string | undefined {
  return errors?.map((error) => extension(error, 'limit')).find((limit) => limit !== undefined);
}

/** Distinct error codes of a result, at most MAX_ERROR_CODES, for the log line. */
export function errorCodesOf(errors: readonly unknown[] | undefined): string[] {
  return [...new Set(errors?.map((error) => extension(error, 'code') ?? 'UNKNOWN'))].slice(0, MAX_ERROR_CODES);
}
