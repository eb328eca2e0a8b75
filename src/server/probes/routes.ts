import type { WholeAnswer } from '../incoming.js';
import type { MaybePromise } from '../pipeline/stages.js';
import type { HttpRequest } from '../request-state.js';
import type { StatusPage } from '../status/page.js';
import { type ProbeSources, probeAnswer } from './answers.js';
import { statusAnswer } from './status.js';

/**
 * /health, /ready and /metrics on the public port (probes/answers.ts, as on ADMIN_PORT), and the status page where
 * STATUS_PAGE_PUBLIC puts it there (`status`).
 */
export function probes(
  sources: ProbeSources,
  status?: StatusPage,
): (request: HttpRequest, path: string) => MaybePromise<WholeAnswer> | undefined {
  return (request, path) =>
    request.http.method === 'GET' || request.http.method === 'HEAD'
      ? (probeAnswer(path, sources) ?? statusAnswer(path, status))
      : undefined;
}
