/** The path of an absolute request URL without building a URL object (this runs per request). */
export function pathOf(url: string): string {
  const scheme = url.indexOf('://');
  const start = scheme < 0 ? url.indexOf('/') : url.indexOf('/', scheme + 3);
  if (start < 0) return '/';
  let end = start;
  while (end < url.length && url[end] !== '?' && url[end] !== '#') end++;
  return url.slice(start, end);
}

/** Served as GraphQL (yoga's use-unhandled-route): the endpoint's path, or a URL ending in it, `/` after it or not. */
export function servedAsGraphQL(url: string, path: string, endpoint: string): boolean {
  return path === endpoint || path === `${endpoint}/` || url.endsWith(endpoint) || url.endsWith(`${endpoint}/`);
}
