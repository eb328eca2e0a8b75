import { missing, type ValidationIssue } from '../validation.js';
import type { Handler } from './shared.js';

const WRONG_CREDENTIALS = JSON.stringify({ detail: 'Incorrect username or password' });
const EMPTY_FORM: Readonly<Record<string, string>> = {};

/** The OAuth2 password flow (form fields username, password, grant_type=password). */
export const login: Handler = (ex, store) => {
  // FastAPI reads Form fields from a form body only; any other body leaves every field missing.
  const form = ex.body.kind === 'form' ? ex.body.value : EMPTY_FORM;
  const issues: ValidationIssue[] = [];
  // An empty form value counts as absent, as in FastAPI.
  const value = (name: string) => (form[name] === '' ? undefined : form[name]);
  const username = value('username');
  const password = value('password');
  const grantType = value('grant_type');
  if (grantType !== undefined && grantType !== 'password') {
    issues.push({
      type: 'string_pattern_mismatch',
      loc: ['body', 'grant_type'],
      msg: "String should match pattern '^password$'",
      input: grantType,
      ctx: { pattern: '^password$' },
    });
  }
  if (username === undefined) issues.push(missing(['body', 'username']));
  if (password === undefined) issues.push(missing(['body', 'password']));
  if (issues.length > 0 || username === undefined || password === undefined) return ex.sendIssues(issues);
  const token = store.login(username, password);
  if (token === undefined) return ex.unauthorized(WRONG_CREDENTIALS);
  ex.send(200, JSON.stringify({ access_token: token, token_type: 'bearer' }));
};
