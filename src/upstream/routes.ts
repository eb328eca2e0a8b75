import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { type OperationName, operationNames } from '../domain/operations.js';

/**
 * Method and path of every upstream operation, relative to UPSTREAM_URL.
 *
 * The contract shows method and path for Delete Head and Get Permissions only (contract 4.1, 4.2);
 * the rest are our decisions (issue "Foundation", route table) and an operator can override any
 * row from UPSTREAM_ROUTES_FILE.
 */
export const httpMethods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof httpMethods)[number];

export interface Route {
  readonly method: HttpMethod;
  /** Path relative to the base URL, with `{name}` placeholders for path parameters. */
  readonly path: string;
}

export type RouteTable = Readonly<Record<OperationName, Route>>;

export const defaultRoutes: RouteTable = {
  listHeads: { method: 'GET', path: '/heads' },
  getHeadExt: { method: 'GET', path: '/heads/{head_id}/ext' },
  updateHead: { method: 'PATCH', path: '/heads/{head_id}' },
  deleteHead: { method: 'DELETE', path: '/heads/{head_id}' },
  listHeadsExt: { method: 'GET', path: '/heads/ext' },
  getHeadById: { method: 'GET', path: '/head/{id}' },
  getHeadExtById: { method: 'GET', path: '/head/{id}/ext' },
  getPermissions: { method: 'GET', path: '/permissions' },
  updateSubscription: { method: 'PATCH', path: '/subscriptions' },
  login: { method: 'POST', path: '/login' },
};

/** The path parameter each operation needs; an overriding path must keep it. */
export const pathParameters: Readonly<Record<OperationName, string | undefined>> = {
  listHeads: undefined,
  getHeadExt: 'head_id',
  updateHead: 'head_id',
  deleteHead: 'head_id',
  listHeadsExt: undefined,
  getHeadById: 'id',
  getHeadExtById: 'id',
  getPermissions: undefined,
  updateSubscription: undefined,
  login: undefined,
};

const routeOverride = z.strictObject({
  method: z.enum(httpMethods, { error: `method must be one of ${httpMethods.join(', ')}` }).optional(),
  path: z
    .string()
    .startsWith('/', { error: 'path must start with /' })
    .refine((p) => !/[?#]/.test(p), { error: 'path must not carry a query or fragment' })
    .optional(),
});

const routeOverrides = z.record(z.string(), routeOverride).superRefine((overrides, ctx) => {
  for (const [operation, route] of Object.entries(overrides)) {
    if (!(operationNames as readonly string[]).includes(operation)) {
      ctx.addIssue({
        code: 'custom',
        path: [operation],
        message: `unknown operation (known: ${operationNames.join(', ')})`,
      });
      continue;
    }
    const param = pathParameters[operation as OperationName];
    if (route.path === undefined) continue;
    const placeholders = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
    const expected = param === undefined ? [] : [param];
    if (placeholders.join() !== expected.join()) {
      ctx.addIssue({
        code: 'custom',
        path: [operation, 'path'],
        message: param === undefined ? 'path takes no placeholder' : `path must contain {${param}} exactly once`,
      });
    }
  }
});

export class RouteConfigError extends Error {
  override name = 'RouteConfigError';
}

/** Applies an override object (the parsed UPSTREAM_ROUTES_FILE) to the defaults. */
export function applyRouteOverrides(overrides: unknown, base: RouteTable = defaultRoutes): RouteTable {
  const parsed = routeOverrides.safeParse(overrides);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new RouteConfigError(`${issue.path.join('.') || 'routes'}: ${issue.message}`);
  }
  const table = { ...base } as Record<OperationName, Route>;
  for (const [operation, route] of Object.entries(parsed.data) as [OperationName, z.infer<typeof routeOverride>][]) {
    table[operation] = { method: route.method ?? base[operation].method, path: route.path ?? base[operation].path };
  }
  return Object.freeze(table);
}

export function loadRouteTable(file: string | undefined): RouteTable {
  if (file === undefined) return defaultRoutes;
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new RouteConfigError(`cannot read a JSON object from ${file} (${(error as Error).message})`);
  }
  return applyRouteOverrides(json);
}

/** Each route's path cut once at its placeholders: literal, name, literal, ... (a name at every odd index). */
const pathParts = new WeakMap<Route, readonly string[]>();

/** Fills the route's placeholder; the value is percent-encoded so an id can never change the path. */
export function fillPath(route: Route, params: Readonly<Record<string, string>> = {}): string {
  let parts = pathParts.get(route);
  if (parts === undefined) {
    parts = route.path.split(/\{([^}]+)\}/);
    pathParts.set(route, parts);
  }
  let path = parts[0]!;
  for (let i = 1; i < parts.length; i += 2) {
    const value = params[parts[i]!];
    if (value === undefined) throw new Error(`missing path parameter ${parts[i]}`);
    path += encodeURIComponent(value) + parts[i + 1]!;
  }
  return path;
}
