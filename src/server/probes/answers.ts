import type { WholeAnswer } from '../incoming.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import type { MaybePromise } from '../pipeline/stages.js';
import type { StatusPage } from '../status/page.js';

export interface ProbeAnswer extends WholeAnswer {
  readonly body: string;
}

export interface ProbeSources {
  /** Whether the upstream answered recently (cached by the caller). */
  readonly ready: () => Promise<boolean>;
  /** A reason not to be ready whatever the upstream last answered (`circuit open`), shown in /ready's body. */
  readonly notReadyBecause?: (() => string | undefined) | undefined;
  readonly metrics: Pick<GatewayMetrics, 'scrape' | 'registry'>;
}

const json = (status: number, body: object): ProbeAnswer => ({
  status,
  headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
  body: JSON.stringify(body),
});

const notReady = (reason?: string) => json(503, { status: 'not ready', reason });

/** `/health` (never asks the upstream), `/ready` and `/metrics`, on both ports (probes/routes.ts, admin-server.ts). */
export function probeAnswer(path: string, sources: ProbeSources): MaybePromise<ProbeAnswer> | undefined {
  switch (path) {
    case '/health':
      return json(200, { status: 'ok' });
    case '/ready': {
      const reason = sources.notReadyBecause?.();
      if (reason !== undefined) return notReady(reason);
      return sources.ready().then(
        (ready) => (ready ? json(200, { status: 'ready' }) : notReady()),
        () => notReady(),
      );
    }
    case '/metrics':
      return sources.metrics.scrape().then(
        (text) => ({
          status: 200,
          headers: { 'content-type': sources.metrics.registry.contentType, 'cache-control': 'no-store' },
          body: text,
        }),
        () => ({
          status: 500,
          headers: { 'content-type': 'text/plain; charset=utf-8' },
          body: 'metrics unavailable\n',
        }),
      );
    default:
      return undefined;
  }
}

/**
 * The status page's files (status/page.ts: `/status` and uPlot's beside it) and its figures at `/status/samples` (read
 * when asked); undefined for any other path, or where the page is off.
 */
function statusAnswer(path: string, page: StatusPage | undefined): MaybePromise<ProbeAnswer> | undefined {
  if (page === undefined) return undefined;
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

/** What a GET or HEAD of a probe's path or the status page's gets, on either port; undefined for anything else. */
export const probeOrStatus = (method: string | undefined, path: string, sources: ProbeSources, page?: StatusPage) =>
  method === 'GET' || method === 'HEAD' ? (probeAnswer(path, sources) ?? statusAnswer(path, page)) : undefined;
