import type { Exchange } from '../exchange.js';
import { HeadShape, type ReferenceStore } from '../store.js';
import { intQuery, type ValidationIssue } from '../validation.js';
import { bearerUser, type Handler, HEAD_NOT_FOUND, pageJson, pageParams, pathUuid } from './shared.js';

const NOT_ENOUGH_PERMISSIONS = JSON.stringify({ detail: 'Not enough permissions' });
const DELETE_ROLES: ReadonlySet<string> = new Set(['admin', 'mod', 'creator']);

/** Get Heads: a page of variant A. */
export const listHeads: Handler = (ex, store) => {
  const issues: ValidationIssue[] = [];
  const { page, size } = pageParams(ex, issues);
  if (issues.length > 0) return ex.sendIssues(issues);
  const rows = store.selectHeads({ search: ex.query?.search, style: ex.query?.style });
  const offset = (page - 1) * size;
  const items = rows.slice(offset, offset + size).map((e) => store.headJson(e, HeadShape.A));
  ex.send(200, pageJson(`[${items.join(',')}]`, rows.length, page, size));
};

/** Get Heads Ext: an array of variant B with head_metadata, by limit and skip. */
export const listHeadsExt: Handler = (ex, store) => {
  const issues: ValidationIssue[] = [];
  const limit = intQuery(ex.query, 'limit', 10, { ge: 1, le: 1000 }, issues);
  const skip = intQuery(ex.query, 'skip', 0, { ge: 0 }, issues);
  if (issues.length > 0) return ex.sendIssues(issues);
  const rows = store.selectHeads({ search: ex.query?.search });
  const items = rows.slice(skip, skip + limit).map((e) => store.headJson(e, HeadShape.B_EXT));
  ex.send(200, `[${items.join(',')}]`);
};

function readHead(
  ex: Exchange,
  store: ReferenceStore,
  paramName: string,
  shape: HeadShape,
  wrapInArray: boolean,
): void {
  const issues: ValidationIssue[] = [];
  const id = pathUuid(ex, paramName, issues);
  if (id === undefined) {
    ex.sendIssues(issues);
    return;
  }
  const entry = store.findHead(id);
  if (entry === undefined) {
    ex.send(404, HEAD_NOT_FOUND);
    return;
  }
  const json = store.headJson(entry, shape);
  ex.send(200, wrapInArray ? `[${json}]` : json);
}

export const getHeadExt: Handler = (ex, store) => readHead(ex, store, 'head_id', HeadShape.A_EXT, false);
/** The contract's Get Head By Id answers an array of one. */
export const getHeadById: Handler = (ex, store) => readHead(ex, store, 'id', HeadShape.B, true);
export const getHeadExtById: Handler = (ex, store) => readHead(ex, store, 'id', HeadShape.B_EXT, false);

export const deleteHead: Handler = (ex, store) => {
  // FastAPI resolves the security dependency before validating parameters: 401/403 come first.
  const user = bearerUser(ex, store);
  if (user === undefined) return ex.unauthorized();
  if (!DELETE_ROLES.has(user.role)) return ex.send(403, NOT_ENOUGH_PERMISSIONS);
  const issues: ValidationIssue[] = [];
  const id = pathUuid(ex, 'head_id', issues);
  if (id === undefined) return ex.sendIssues(issues);
  if (!store.deleteHead(id)) return ex.send(404, HEAD_NOT_FOUND);
  ex.send(204, undefined);
};
