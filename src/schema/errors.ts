import {
  GraphQLError,
  type GraphQLInputType,
  getNullableType,
  isInputObjectType,
  isInputType,
  isListType,
  Kind,
  print,
  typeFromAST,
  type ValueNode,
} from 'graphql';
import { CIRCUIT_OPEN, RATE_LIMITED, UpstreamError } from '../upstream/errors.js';
import type { ValidationDetail } from '../upstream/schemas.js';
import { schema } from './index.js';
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
 * the caller's token. Anything that is not an UpstreamError is left to the masking (`maskError`).
 */
export function toClientError(error: UpstreamError): GraphQLError {
  const code = error.code === 'ABORTED' ? 'UPSTREAM_TIMEOUT' : error.code;
  const extensions: Record<string, unknown> = {
    code,
    upstream: { operation: error.operation, ...(error.status ? { status: error.status } : {}) },
  };
  // An open breaker refused the call: nothing reached the upstream, so a client may retry it as it is, once the breaker
  // may let it through.
  if (error.reason === CIRCUIT_OPEN)
    extensions.upstream = {
      operation: error.operation,
      reason: CIRCUIT_OPEN,
      circuit: error.circuit ?? 'operation',
      sent: false,
    };
  // The upstream refused it for its rate (429): nothing was applied, and it may have said when to come back.
  if (error.reason === RATE_LIMITED)
    extensions.upstream = { operation: error.operation, status: error.status, reason: RATE_LIMITED };
  // The gateway's own pool had no connection for it in time: nothing was sent (a change was not applied).
  if (error.code === 'OVERLOADED') extensions.upstream = { operation: error.operation, sent: false };
  if (error.retryAfterMs !== undefined) extensions.retryAfterMs = error.retryAfterMs;
  if (error.code === 'BAD_USER_INPUT') {
    extensions.fieldErrors = error.details.map(
      (detail): FieldError => ({
        path: fieldPath(error.operation, detail.loc),
        message: safeMessage(detail.msg),
        type: detail.type,
      }),
    );
  }
  return new GraphQLError(error.message, { extensions });
}

type ClientError = { readonly extensions?: Record<string, unknown> };

/**
 * When a call refused whole may be sent again (`toClientError`'s `retryAfterMs`, on an
 * UPSTREAM_UNAVAILABLE: an open breaker's, or the upstream's 429 that said when); undefined for
 * any other error.
 */
export function retryAfterMsOf(error: ClientError): number | undefined {
  const extensions = error.extensions;
  return extensions?.code === 'UPSTREAM_UNAVAILABLE' && typeof extensions.retryAfterMs === 'number'
    ? extensions.retryAfterMs
    : undefined;
}

/** Whether an open upstream breaker refused the call (nothing was sent). */
export const refusedByBreaker = (error: ClientError): boolean =>
  (error.extensions?.upstream as { reason?: unknown } | undefined)?.reason === CIRCUIT_OPEN;

/** graphql-js's reasons that never carry the value (a scalar's own reason may: "Value is not a valid UUID: …"). */
const valueFreeReasons = [
  /^Field "[^"]+" of required type "[^"]+" was not provided\.$/,
  /^Field "[^"]+" is not defined by type "[^"]+"\./,
  /^Expected non-nullable type "[^"]+" not to be null\.$/,
  /^Expected type "[^"]+" to be an object\.$/,
  /^Expected type "[^"]+"\.$/,
];

/** The input type `path` leads to inside `type`, if the path fits it. */
function typeAt(type: GraphQLInputType, path: readonly (string | number)[]): GraphQLInputType | undefined {
  let at: GraphQLInputType = type;
  for (const segment of path) {
    const nullable = getNullableType(at);
    if (typeof segment === 'number') {
      if (!isListType(nullable)) return undefined;
      at = nullable.ofType as GraphQLInputType;
    } else {
      const field = isInputObjectType(nullable) ? nullable.getFields()[segment] : undefined;
      if (field === undefined) return undefined;
      at = field.type;
    }
  }
  return at;
}

/**
 * graphql-js ends a message with its suggestions: `… Did you mean "x"?`, `… Did you mean to use an inline fragment on
 * "Head"?`.
 */
export const suggestion = /\s*Did you mean [^?]*\?/g;

/** graphql-js's wording of a variable it refused; a message already rewritten here ("is invalid") does not match. */
const refusedVariablePattern =
  /^Variable "\$(\w+)" (?:got invalid value|of required type|of non-null type|expected value of type)/;

/** The variable a graphql-js coercion error refuses, if it is one (an error with a path is a resolver's). */
const refusedVariableName = (error: GraphQLError): string | undefined =>
  error.path === undefined ? refusedVariablePattern.exec(error.message)?.[1] : undefined;

const pathSegments = (printed: string) =>
  printed
    .split(/\.|\[(\d+)\]/)
    .filter(Boolean)
    .map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));

/**
 * graphql-js refuses a variable that does not fit its type (a hair id that is not a UUID) before
 * any resolver runs, with a message that quotes the whole value (a password with it) and no code.
 * Clients get it as the other input errors: BAD_USER_INPUT with fieldErrors, the path being the
 * variable's (`input.hairId`), and a message naming the variable, the path and the expected type,
 * never the value.
 */
function variableError(error: GraphQLError): GraphQLError | undefined {
  const variable = refusedVariableName(error);
  if (variable === undefined) return undefined;
  const definition = error.nodes?.[0];
  let path: (string | number)[] = [variable];
  let message = error.message;
  let reason = error.message;
  if (error.message.startsWith(`Variable "$${variable}" got invalid value `)) {
    // The message is `<prefix with the value>[ at "<path>"]; <reason>`, the reason being the
    // original error's message: cut at its known end rather than parse the value.
    const inner = error.originalError;
    // Production cuts the suggestions from the message (operation-limits.ts), not from the original's.
    const hidden = !/Did you mean/.test(error.message);
    const innerMessage =
      inner === undefined ? undefined : hidden ? inner.message.replace(suggestion, '') : inner.message;
    const suffix = innerMessage === undefined ? undefined : `; ${innerMessage}`;
    const prefix =
      suffix !== undefined && error.message.endsWith(suffix) ? error.message.slice(0, -suffix.length) : undefined;
    const at = prefix === undefined ? undefined : / at "([^"]+)"$/.exec(prefix)?.[1];
    if (at !== undefined && (at === variable || at.startsWith(`${variable}.`) || at.startsWith(`${variable}[`)))
      path = pathSegments(at);
    const declared = definition?.kind === Kind.VARIABLE_DEFINITION ? typeFromAST(schema, definition.type) : undefined;
    const expected = declared === undefined || !isInputType(declared) ? undefined : typeAt(declared, path.slice(1));
    const ours = inner instanceof GraphQLError && inner.extensions?.code === 'BAD_USER_INPUT';
    // An enum's reason quotes the value; its suggestions name the schema's values (cut in production).
    const enumReason =
      innerMessage === undefined
        ? undefined
        : /^Value ".*" does not exist in ("[^"]+" enum\.(?: Did you mean [^?]*\?)?)$/s.exec(innerMessage)?.[1];
    reason =
      enumReason !== undefined
        ? `Value does not exist in ${enumReason}`
        : innerMessage !== undefined && (ours || valueFreeReasons.some((pattern) => pattern.test(innerMessage)))
          ? innerMessage
          : `Expected a value of type ${expected === undefined ? 'the variable declares' : `"${String(expected)}"`}.`;
    message = `Variable "$${variable}" is invalid${path.length > 1 ? ` at "${printPath(path)}"` : ''}: ${reason}`;
  }
  const fieldErrors: FieldError[] = [{ path, message: reason, type: 'invalid_variable' }];
  return new GraphQLError(message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    extensions: { code: 'BAD_USER_INPUT', fieldErrors },
  });
}

const printPath = (path: readonly (string | number)[]) =>
  path.map((segment, i) => (typeof segment === 'number' ? `[${segment}]` : i === 0 ? segment : `.${segment}`)).join('');

/** Literal values in a document that could carry something secret (not enum names, booleans or null). */
const literalKinds = new Set<Kind>([Kind.STRING, Kind.INT, Kind.FLOAT, Kind.LIST, Kind.OBJECT]);

function literalTexts(node: ValueNode, into: Set<string>): Set<string> {
  if (node.kind === Kind.LIST) for (const value of node.values) literalTexts(value, into);
  else if (node.kind === Kind.OBJECT) for (const field of node.fields) literalTexts(field.value, into);
  // Two characters or fewer cannot hide a secret and would mangle the message's own words.
  else if ((node.kind === Kind.STRING || node.kind === Kind.INT || node.kind === Kind.FLOAT) && node.value.length > 2)
    into.add(node.value);
  if (literalKinds.has(node.kind)) into.add(print(node));
  return into;
}

/**
 * A validation error about a literal argument quotes it (`Expected value of type "UUID!", found
 * "…"; Value is not a valid UUID: …`): every literal the error points at is cut from the message.
 */
export function withoutLiterals(error: GraphQLError): GraphQLError {
  const texts = new Set<string>();
  for (const node of error.nodes ?? [])
    if ('kind' in node && literalKinds.has(node.kind)) literalTexts(node as ValueNode, texts);
  let message = error.message;
  // Longest first: an object's print contains its fields' values.
  for (const text of [...texts].sort((a, b) => b.length - a.length)) message = message.split(text).join('…');
  if (message !== error.message) error.message = message;
  return error;
}

/** A syntax error quotes the token it stopped at: a string or number literal is named by its kind only. */
const quotedLiteral = /\b(String|BlockString|Int|Float) "(?:[^"\\]|\\.)*"/g;

/**
 * What a log line may say of an error the masking replaced: the gateway's own faults at error, a client's mistakes at
 * debug, never a value.
 */
export type ErrorLogEntry = { level: 'error' | 'warn' | 'debug'; fields: Record<string, unknown>; message: string };

/**
 * The log line of an error the masking replaced; none for a call an open breaker refused (counted, and its breaker's
 * changes are logged).
 */
export function errorLogEntry(error: unknown): ErrorLogEntry | undefined {
  const original = error instanceof GraphQLError ? (error.originalError ?? error) : error;
  if (original instanceof UpstreamError) {
    if (original.reason === CIRCUIT_OPEN) return undefined;
    // The route stays here and in metrics; clients never see it.
    const fields = {
      code: original.code,
      operation: original.operation,
      method: original.method,
      route: original.path,
      status: original.status,
    };
    // Its message is ours and names no value (errors.ts in upstream/).
    return { level: original.code.startsWith('UPSTREAM_') ? 'warn' : 'debug', fields, message: original.message };
  }
  if (error instanceof GraphQLError && refusedVariableName(error) !== undefined)
    return { level: 'debug', fields: { code: 'BAD_USER_INPUT' }, message: 'variable refused' };
  if (original instanceof GraphQLError)
    return { level: 'debug', fields: { code: original.extensions?.code }, message: 'request refused' };
  const name = original instanceof Error ? original.name : typeof original;
  return {
    level: 'error',
    fields: { error: name },
    message: original instanceof Error ? original.message : 'unexpected error',
  };
}

/**
 * The masking of an error (server/answers/masking.ts): upstream errors mapped, our own GraphQLErrors
 * kept, everything else masked as the gateway's fault: `extensions.unexpected`, which the answer's
 * status rule reads (HTTP 500 when nothing was answered) and its serialisation leaves out.
 */
export function maskError(error: unknown, fallbackMessage: string): Error {
  if (error instanceof GraphQLError && error.message.startsWith('Syntax Error: ')) {
    const message = error.message.replace(quotedLiteral, '$1');
    if (message !== error.message) error.message = message;
  }
  const refusedVariable = error instanceof GraphQLError ? variableError(error) : undefined;
  if (refusedVariable) return refusedVariable;
  const original = error instanceof GraphQLError ? (error.originalError ?? error) : error;
  if (original instanceof UpstreamError) {
    const mapped = toClientError(original);
    return error instanceof GraphQLError
      ? new GraphQLError(mapped.message, {
          nodes: error.nodes,
          source: error.source,
          positions: error.positions,
          path: error.path,
          extensions: mapped.extensions,
        })
      : mapped;
  }
  if (original instanceof GraphQLError) return error as GraphQLError;
  return new GraphQLError(fallbackMessage, {
    extensions: { code: 'INTERNAL_SERVER_ERROR', unexpected: true },
    ...(error instanceof GraphQLError
      ? { nodes: error.nodes, path: error.path, positions: error.positions, source: error.source }
      : {}),
  });
}
