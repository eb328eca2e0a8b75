import type { GraphQLError } from 'graphql';

/*
 * What an operation's log line, metrics and span say of it: its outcome, its name as a label,
 * its error codes and the limit that refused it. Pure rules over a result; operation-telemetry.ts
 * applies them.
 */

export type OperationOutcome = 'ok' | 'error' | 'refused';

const MAX_NAME_LENGTH = 64;
const MAX_ERROR_CODES = 10;
const invalidNameChars = /[^A-Za-z0-9_]/g;

/** A name safe as a label and a log field: ASCII letters, digits and `_`, at most 64 of them. */
export function operationLabel(name: string | null | undefined): string {
  if (name === undefined || name === null || name === '') return 'anonymous';
  const capped = name.length > MAX_NAME_LENGTH ? name.slice(0, MAX_NAME_LENGTH) : name;
  return capped.replace(invalidNameChars, '_');
}

/**
 * The outcome rule. GraphQL itself says when a request never reached execution: its result has
 * errors and no `data` entry at all (spec, "Response Format"). So:
 * - `ok`: no errors;
 * - `error`: errors and a `data` entry (even `null`): execution ran and something failed;
 * - `refused`: errors without `data`: turned away before execution (request parameters, syntax,
 *   validation with the depth/alias/token/directive limits and disabled introspection, variables
 *   that do not fit their types, the upstream call budget estimate); it made no upstream call.
 * A masked crash (INTERNAL_SERVER_ERROR) without data is an `error`, not a refusal: a bug must
 * not hide among bad requests.
 */
export function outcomeOf(
  result: { errors?: readonly unknown[] | undefined; data?: unknown } | undefined,
): OperationOutcome {
  if (result === undefined) return 'refused';
  const errors = result.errors;
  if (errors === undefined || errors.length === 0) return 'ok';
  if ('data' in result && result.data !== undefined) return 'error';
  for (const error of errors) if (codeOf(error) === 'INTERNAL_SERVER_ERROR') return 'error';
  return 'refused';
}

function codeOf(error: unknown): string | undefined {
  const code = (error as Partial<GraphQLError> | null)?.extensions?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The limit a refusal names in `extensions.limit` (the `limit` label of gateway_refusals_total). */
export function limitOf(errors: readonly unknown[] | undefined): string | undefined {
  for (const error of errors ?? []) {
    const limit = (error as Partial<GraphQLError> | null)?.extensions?.limit;
    if (typeof limit === 'string') return limit;
  }
  return undefined;
}

/** Distinct error codes of a result, at most MAX_ERROR_CODES, for the log line. */
export function errorCodesOf(errors: readonly unknown[] | undefined): string[] {
  const codes: string[] = [];
  if (errors === undefined) return codes;
  for (const error of errors) {
    const code = codeOf(error) ?? 'UNKNOWN';
    if (!codes.includes(code)) {
      codes.push(code);
      if (codes.length === MAX_ERROR_CODES) break;
    }
  }
  return codes;
}
