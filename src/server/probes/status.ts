import type { StatusPage } from '../status/page.js';
import type { ProbeAnswer } from './answers.js';

/**
 * The status page (status/page.ts) on ADMIN_PORT, and on the public port where STATUS_PAGE_PUBLIC says: `/status`,
 * its figures at `/status/samples` (JSON, read when asked) and uPlot's two files beside it; undefined for any other
 * path, or where the page is off.
 */
export function statusAnswer(
  path: string,
  page: StatusPage | undefined,
): ProbeAnswer | Promise<ProbeAnswer> | undefined {
  if (page === undefined || (path !== '/status' && !path.startsWith('/status/'))) return undefined;
  const headers = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
  if (path === '/status/samples')
    return page.sampler.snapshot().then(
      (snapshot) => ({
        status: 200,
        headers: { ...headers, 'content-type': 'application/json; charset=utf-8' },
        body: JSON.stringify(snapshot),
      }),
      () => ({ status: 500, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: 'status unavailable\n' }),
    );
  const file = page.files.get(path);
  if (file === undefined) return undefined;
  return {
    status: 200,
    headers: { ...headers, 'content-type': file.type, 'content-security-policy': page.policy },
    body: file.body,
  };
}
