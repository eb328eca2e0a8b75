import { type OperationName, operationNames } from '../domain/operations.js';
import type { RouteTable } from '../upstream/routes.js';
import type { RoutedOperation } from './recording.js';

export const BASE_PATH = '/v2';

interface CompiledRoute extends RoutedOperation {
  readonly method: string;
  /** Path segments; the placeholder segment is matched by prefix/suffix instead. */
  readonly segments: readonly string[];
  readonly paramIndex: number;
  readonly paramPrefix: string;
  readonly paramSuffix: string;
}

export type RouteMatch = { route: CompiledRoute; param: string | undefined } | 'method-not-allowed' | undefined;

/** The route table compiled once: routes bucketed by segment count. */
export type Router = ReadonlyMap<number, readonly CompiledRoute[]>;

/**
 * Buckets the route table by segment count once, so a request costs one split and a few string
 * compares. Routes without a placeholder come first: a literal segment (`/heads/ext`) must beat a
 * placeholder (`/heads/{head_id}`) whatever order an override file lists them in.
 */
export function compileRoutes(routes: RouteTable): Router {
  const buckets = new Map<number, CompiledRoute[]>();
  operationNames.forEach((operation: OperationName, operationIndex) => {
    const { method, path } = routes[operation];
    const segments = path.split('/');
    const paramIndex = segments.findIndex((s) => s.includes('{'));
    const placeholder = paramIndex < 0 ? '' : segments[paramIndex]!;
    const open = placeholder.indexOf('{');
    const compiled: CompiledRoute = {
      operation,
      operationIndex,
      method,
      segments,
      paramIndex,
      paramPrefix: paramIndex < 0 ? '' : placeholder.slice(0, open),
      paramSuffix: paramIndex < 0 ? '' : placeholder.slice(placeholder.indexOf('}') + 1),
    };
    const bucket = buckets.get(segments.length) ?? [];
    bucket.push(compiled);
    buckets.set(segments.length, bucket);
  });
  for (const bucket of buckets.values()) bucket.sort((a, b) => Number(a.paramIndex >= 0) - Number(b.paramIndex >= 0));
  return buckets;
}

/** Routes a request path (with the `/v2` base, without the query); the path parameter comes back URL-decoded. */
export function routeRequest(router: Router, method: string, path: string): RouteMatch {
  // 47 is '/': `/v2x/...` is not under the base.
  if (path.length <= BASE_PATH.length || !path.startsWith(BASE_PATH) || path.charCodeAt(BASE_PATH.length) !== 47)
    return undefined;
  const match = matchRoute(router, method, path.slice(BASE_PATH.length));
  if (typeof match === 'object' && match.param !== undefined && match.param.includes('%')) {
    try {
      match.param = decodeURIComponent(match.param);
    } catch {
      // Left encoded: it then fails UUID parsing with the offending character named.
    }
  }
  return match;
}

function matchRoute(router: Router, method: string, relativePath: string): RouteMatch {
  const bucket = router.get(countSegments(relativePath));
  if (bucket === undefined) return undefined;
  const parts = relativePath.split('/');
  let pathMatched = false;
  for (const route of bucket) {
    let param: string | undefined;
    let ok = true;
    for (let i = 1; i < parts.length; i++) {
      const part = parts[i]!;
      if (i === route.paramIndex) {
        const { paramPrefix: prefix, paramSuffix: suffix } = route;
        // Starlette's placeholder is [^/]+: an empty value never matches.
        if (part.length <= prefix.length + suffix.length || !part.startsWith(prefix) || !part.endsWith(suffix)) {
          ok = false;
          break;
        }
        param = part.slice(prefix.length, part.length - suffix.length);
      } else if (part !== route.segments[i]) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    if (route.method === method) return { route, param };
    pathMatched = true;
  }
  return pathMatched ? 'method-not-allowed' : undefined;
}

function countSegments(path: string): number {
  let n = 1;
  for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) n++;
  return n;
}
