import type { GatewayMetrics } from '../instruments/metrics.js';

export interface ProbeAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
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

export const healthy = (): ProbeAnswer => json(200, { status: 'ok' });

/** `/health` (never asks the upstream), `/ready` and `/metrics`, on both ports (probes/routes.ts, admin-server.ts). */
export function probeAnswer(path: string, sources: ProbeSources): ProbeAnswer | Promise<ProbeAnswer> | undefined {
  switch (path) {
    case '/health':
      return healthy();
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
