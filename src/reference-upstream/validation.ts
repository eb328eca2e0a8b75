import { characterLength } from './seed-validation.js';

/*
 * FastAPI/pydantic v2 validation issues, worded as pydantic words them, so that a client's
 * error mapping tested here behaves the same against the real service. Like FastAPI we send
 * `input` (and `ctx` for constraint errors) besides the contract's loc/msg/type.
 */

export type Loc = (string | number)[];

export interface ValidationIssue {
  type: string;
  loc: Loc;
  msg: string;
  input: unknown;
  ctx?: Record<string, unknown>;
}

export const missing = (loc: Loc, input: unknown = null): ValidationIssue => ({
  type: 'missing',
  loc,
  msg: 'Field required',
  input,
});

const HEX = new Uint8Array(128);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;

function isHex(code: number): boolean {
  return code < 128 && HEX[code] === 1;
}

const GROUP_LENGTHS = [8, 4, 4, 4, 12] as const;

/**
 * Parses a UUID as pydantic does (hyphenated, simple, braced or urn form, any case) and returns
 * the canonical lower-case form, or the reason it is not one. The canonical lower-case form is
 * checked first without allocation because it is what every well-behaved client sends.
 */
export function parseUuid(input: string): string | { reason: string } {
  if (input.length === 36) {
    let canonical = true;
    let lower = true;
    for (let i = 0; i < 36; i++) {
      const code = input.charCodeAt(i);
      if (i === 8 || i === 13 || i === 18 || i === 23) {
        if (code !== 45) {
          canonical = false;
          break;
        }
      } else if (!isHex(code)) {
        canonical = false;
        break;
      } else if (code >= 65 && code <= 70) {
        lower = false;
      }
    }
    if (canonical) return lower ? input : input.toLowerCase();
  }
  let body = input;
  let offset = 0;
  if (body.toLowerCase().startsWith('urn:uuid:')) {
    body = body.slice(9);
    offset = 9;
  } else if (body.startsWith('{') && body.endsWith('}')) {
    body = body.slice(1, -1);
    offset = 1;
  }
  for (let i = 0; i < body.length; i++) {
    const code = body.charCodeAt(i);
    if (code !== 45 && !isHex(code)) {
      return {
        reason: `invalid character: expected an optional prefix of \`urn:uuid:\` followed by [0-9a-fA-F-], found \`${body[i]}\` at ${i + offset + 1}`,
      };
    }
  }
  if (body.includes('-')) {
    const groups = body.split('-');
    if (groups.length !== 5) return { reason: `invalid group count: expected 5, found ${groups.length}` };
    for (let g = 0; g < 5; g++) {
      if (groups[g]!.length !== GROUP_LENGTHS[g]) {
        return {
          reason: `invalid group length in group ${g}: expected ${GROUP_LENGTHS[g]}, found ${groups[g]!.length}`,
        };
      }
    }
    return groups.join('-').toLowerCase();
  }
  if (body.length !== 32)
    return { reason: `invalid length: expected length 32 for simple format, found ${body.length}` };
  const hex = body.toLowerCase();
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A UUID from a path, query or body value; pushes the pydantic issue and returns undefined when it is not one. */
export function uuidValue(input: unknown, loc: Loc, issues: ValidationIssue[]): string | undefined {
  if (typeof input !== 'string') {
    issues.push({ type: 'uuid_type', loc, msg: 'UUID input should be a string, bytes or UUID object', input });
    return undefined;
  }
  const parsed = parseUuid(input);
  if (typeof parsed === 'string') return parsed;
  issues.push({
    type: 'uuid_parsing',
    loc,
    msg: `Input should be a valid UUID, ${parsed.reason}`,
    input,
    ctx: { error: parsed.reason },
  });
  return undefined;
}

/** Pydantic's lax integer from a query string: optional sign and surrounding whitespace, digits only. */
function parseIntegerText(text: string): number | undefined {
  const s = text.trim();
  let i = s.startsWith('-') || s.startsWith('+') ? 1 : 0;
  if (i === s.length) return undefined;
  for (; i < s.length; i++) {
    const code = s.charCodeAt(i);
    if (code < 48 || code > 57) return undefined;
  }
  return Number(s);
}

export interface IntBounds {
  ge?: number;
  le?: number;
}

/** An integer query parameter with its default and bounds; NaN (with an issue pushed) when invalid. */
export function intQuery(
  query: Record<string, string> | undefined,
  name: string,
  fallback: number,
  bounds: IntBounds,
  issues: ValidationIssue[],
): number {
  const raw = query?.[name];
  if (raw === undefined) return fallback;
  const loc = ['query', name];
  const value = parseIntegerText(raw);
  if (value === undefined) {
    issues.push({
      type: 'int_parsing',
      loc,
      msg: 'Input should be a valid integer, unable to parse string as an integer',
      input: raw,
    });
    return Number.NaN;
  }
  if (bounds.ge !== undefined && value < bounds.ge) {
    issues.push({
      type: 'greater_than_equal',
      loc,
      msg: `Input should be greater than or equal to ${bounds.ge}`,
      input: raw,
      ctx: { ge: bounds.ge },
    });
    return Number.NaN;
  }
  if (bounds.le !== undefined && value > bounds.le) {
    issues.push({
      type: 'less_than_equal',
      loc,
      msg: `Input should be less than or equal to ${bounds.le}`,
      input: raw,
      ctx: { le: bounds.le },
    });
    return Number.NaN;
  }
  return value;
}

export function stringValue(
  input: unknown,
  loc: Loc,
  issues: ValidationIssue[],
  maxLength?: number,
): string | undefined {
  if (typeof input !== 'string') {
    issues.push({ type: 'string_type', loc, msg: 'Input should be a valid string', input });
    return undefined;
  }
  if (maxLength !== undefined && characterLength(input) > maxLength) {
    issues.push({
      type: 'string_too_long',
      loc,
      msg: `String should have at most ${maxLength} characters`,
      input,
      ctx: { max_length: maxLength },
    });
    return undefined;
  }
  return input;
}

export function isPlainObject(input: unknown): input is Record<string, unknown> {
  return typeof input === 'object' && input !== null && !Array.isArray(input);
}

export function dictValue(input: unknown, loc: Loc, issues: ValidationIssue[]): Record<string, unknown> | undefined {
  if (isPlainObject(input)) return input;
  issues.push({ type: 'dict_type', loc, msg: 'Input should be a valid dictionary', input });
  return undefined;
}

const TRUE_WORDS = new Set(['true', 't', 'yes', 'y', 'on', '1']);
const FALSE_WORDS = new Set(['false', 'f', 'no', 'n', 'off', '0']);

/** Pydantic's lax boolean: JSON booleans, 0/1 and the usual words; anything else is refused. */
export function boolValue(input: unknown, loc: Loc, issues: ValidationIssue[]): boolean | undefined {
  if (typeof input === 'boolean') return input;
  if (input === 0 || input === 1) return input === 1;
  if (typeof input === 'string') {
    const word = input.trim().toLowerCase();
    if (TRUE_WORDS.has(word)) return true;
    if (FALSE_WORDS.has(word)) return false;
  }
  if (typeof input === 'string' || typeof input === 'number') {
    issues.push({
      type: 'bool_parsing',
      loc,
      msg: 'Input should be a valid boolean, unable to interpret input',
      input,
    });
  } else {
    issues.push({ type: 'bool_type', loc, msg: 'Input should be a valid boolean', input });
  }
  return undefined;
}

export function enumValue<T extends string>(
  input: unknown,
  allowed: readonly T[],
  loc: Loc,
  issues: ValidationIssue[],
): T | undefined {
  if (typeof input === 'string' && (allowed as readonly string[]).includes(input)) return input as T;
  const quoted = allowed.map((v) => `'${v}'`);
  const expected = quoted.length < 2 ? quoted.join('') : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
  issues.push({ type: 'enum', loc, msg: `Input should be ${expected}`, input, ctx: { expected } });
  return undefined;
}
