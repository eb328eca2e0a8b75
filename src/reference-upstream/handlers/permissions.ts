import type { ValidationIssue } from '../validation.js';
import { bearerUser, type Handler, pageJson, pageParams } from './shared.js';

/** Get Permissions: a page, for any signed-in user. */
export const getPermissions: Handler = (ex, store) => {
  if (bearerUser(ex, store) === undefined) return ex.unauthorized();
  const issues: ValidationIssue[] = [];
  const { page, size } = pageParams(ex, issues);
  if (issues.length > 0) return ex.sendIssues(issues);
  const offset = (page - 1) * size;
  ex.send(200, pageJson(store.permissionsJson(offset, size), store.permissionCount, page, size));
};
