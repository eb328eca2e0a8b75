/** The path of an absolute request URL without building a URL object (this runs per request). */
export function pathOf(url: string): string {
  const scheme = url.indexOf('://');
  const start = scheme < 0 ? url.indexOf('/') : url.indexOf('/', scheme + 3);
  if (start < 0) return '/';
  let end = url.length;
  for (let i = start; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 63 /* ? */ || c === 35 /* # */) {
      end = i;
      break;
    }
  }
  return url.slice(start, end);
}

/**
 * Whether the gateway serves a request as GraphQL rather than as an unknown route (yoga's rule):
 * (use-unhandled-route), the endpoint's path with or without a trailing slash, or a URL that ends
 * in it.
 */
export function servedAsGraphQL(url: string, path: string, endpoint: string): boolean {
  return path === endpoint || path === `${endpoint}/` || url.endsWith(endpoint) || url.endsWith(`${endpoint}/`);
}
