import { GraphQLError } from 'graphql';
import { UpstreamError } from '../upstream/errors.js';
import type { ValidationDetail } from '../upstream/schemas.js';
import type { FieldError } from './inputs.js';

/** Upstream operations whose inputs come from a mutation's `input` argument. */
const inputRooted = new Set(['updateHead', 'deleteHead', 'updateSubscription', 'login']);

/**
 * An upstream's validation message is shown to the client, so anything in it that could be an
 * address or a credential is cut out first.
 */
function safeMessage(message: string): string {
  return message
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, '[address]')
    .replace(/\bbearer\s+\S+/gi, 'Bearer [redacted]')
    .slice(0, 300);
}

const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * Where an upstream 422 `loc` points in the GraphQL operation: `["body","hair_id"]` is
 * `["input","hairId"]`, a path parameter is the `id` the client gave.
 */
function fieldPath(operation: string, loc: ValidationDetail['loc']): (string | number)[] {
  const [where, ...rest] = loc;
  const names = rest.map((segment) => (typeof segment === 'string' ? camel(segment) : segment));
  const inside = where === 'path' ? ['id'] : names;
  return inputRooted.has(operation) && where !== 'query' ? ['input', ...inside] : inside;
}

/**
 * The one place where upstream failures become what clients read: a GraphQLError with
 * `extensions.code`, a message naming the operation and never the upstream's address, body or
 * the caller's token. Anything that is not an UpstreamError is left to yoga's masking.
 */
export function toClientError(error: UpstreamError): GraphQLError {
  const code = error.code === 'ABORTED' ? 'UPSTREAM_TIMEOUT' : error.code;
  const extensions: Record<string, unknown> = { code, upstream: { operation: error.operation, ...(error.status ? { status: error.status } : {}) } };
  if (error.code === 'BAD_USER_INPUT') {
    extensions.fieldErrors = error.details.map(
      (detail): FieldError => ({ path: fieldPath(error.operation, detail.loc), message: safeMessage(detail.msg), type: detail.type }),
    );
  }
  return new GraphQLError(error.message, { extensions });
}

const invalidVariable = /^Variable "\$([^"]+)" (?:got invalid value .*?(?: at "([^"]+)")?; (.*)|(.*))$/s;

/**
 * graphql-js refuses a variable that does not fit its type (a hair id that is not a UUID) before
 * any resolver runs, with a message and no code. Clients get it as the other input errors:
 * BAD_USER_INPUT with fieldErrors, the path being the variable's (`input.hairId`).
 */
function variableError(error: GraphQLError): GraphQLError | undefined {
  if (error.extensions?.code !== undefined || error.path !== undefined) return undefined;
  const match = invalidVariable.exec(error.message);
  if (!match) return undefined;
  const [, variable, at, reason, other] = match;
  const path = (at ?? variable!).split(/\.|\[(\d+)\]/).filter(Boolean).map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
  const fieldErrors: FieldError[] = [{ path, message: (reason ?? other ?? error.message).trim(), type: 'invalid_variable' }];
  return new GraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, extensions: { code: 'BAD_USER_INPUT', fieldErrors } });
}

/** yoga's `maskError`: upstream errors mapped, our own GraphQLErrors kept, everything else masked. */
export function maskError(error: unknown, fallbackMessage: string): Error {
  const refusedVariable = error instanceof GraphQLError ? variableError(error) : undefined;
  if (refusedVariable) return refusedVariable;
  const original = error instanceof GraphQLError ? (error.originalError ?? error) : error;
  if (original instanceof UpstreamError) {
    const mapped = toClientError(original);
    return error instanceof GraphQLError
      ? new GraphQLError(mapped.message, { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, extensions: mapped.extensions })
      : mapped;
  }
  if (original instanceof GraphQLError) return error as GraphQLError;
  return new GraphQLError(fallbackMessage, {
    extensions: { code: 'INTERNAL_SERVER_ERROR' },
    ...(error instanceof GraphQLError ? { nodes: error.nodes, path: error.path, positions: error.positions, source: error.source } : {}),
  });
}
