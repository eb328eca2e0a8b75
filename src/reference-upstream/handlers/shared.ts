import type { Exchange } from '../exchange.js';
import type { SeedUser } from '../seed.js';
import type { ReferenceStore } from '../store.js';
import { intQuery, type Loc, uuidValue, type ValidationIssue } from '../validation.js';

/** One operation of the route table: answers `ex` from `store`. */
export type Handler = (ex: Exchange, store: ReferenceStore) => void;

export const HEAD_NOT_FOUND = JSON.stringify({ detail: 'Head not found' });

export function pathUuid(ex: Exchange, name: string, issues: ValidationIssue[]): string | undefined {
  return uuidValue(ex.param, ['path', name], issues);
}

export function pageParams(ex: Exchange, issues: ValidationIssue[]): { page: number; size: number } {
  const page = intQuery(ex.query, 'page', 1, { ge: 1 }, issues);
  const size = intQuery(ex.query, 'size', 50, { ge: 1, le: 100 }, issues);
  return { page, size };
}

export const pageJson = (itemsJson: string, total: number, page: number, size: number): string =>
  `{"items":${itemsJson},"total":${total},"page":${page},"size":${size},"pages":${Math.ceil(total / size)}}`;

/** Like OAuth2PasswordBearer: scheme must be Bearer; an unknown token counts as none. */
export function bearerUser(ex: Exchange, store: ReferenceStore): Readonly<SeedUser> | undefined {
  const header = ex.req.headers.authorization;
  if (header === undefined) return undefined;
  const space = header.indexOf(' ');
  if (space < 0 || header.slice(0, space).toLowerCase() !== 'bearer') return undefined;
  return store.userForToken(header.slice(space + 1).trim());
}

/** A field of an update body; null means "not given" (the contract's updates set fields, never clear them). */
export const given = (body: Record<string, unknown>, name: string): unknown =>
  body[name] === null ? undefined : body[name];

export const bodyLoc = (name: string): Loc => ['body', name];

/** Reads one field's value, pushing an issue (and answering undefined) when it is wrong. */
export type FieldParser<T> = (input: unknown, loc: Loc, issues: ValidationIssue[]) => T | undefined;

/** Sets `patch[name]` from an update body's field when it is given and valid; a wrong one adds its issue. */
export function patchField<P, K extends keyof P & string>(
  patch: P,
  body: Record<string, unknown>,
  name: K,
  parse: FieldParser<P[K]>,
  issues: ValidationIssue[],
): void {
  const input = given(body, name);
  if (input === undefined) return;
  const value = parse(input, bodyLoc(name), issues);
  if (value !== undefined) patch[name] = value;
}

/** A UUID field that must name a record the store has (pydantic's value_error otherwise). */
export const knownUuid =
  (known: (id: string) => boolean, what: string): FieldParser<string> =>
  (input, loc, issues) => {
    const id = uuidValue(input, loc, issues);
    if (id === undefined || known(id)) return id;
    issues.push({ type: 'value_error', loc, msg: `Value error, unknown ${what}`, input });
    return undefined;
  };
