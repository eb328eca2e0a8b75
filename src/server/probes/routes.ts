import type { WholeAnswer } from '../incoming.js';
import type { MaybePromise } from '../pipeline/stages.js';
import type { HttpRequest } from '../request-state.js';
import { type ProbeSources, probeAnswer } from './answers.js';

/** /health, /ready and /metrics on the public port (probes/answers.ts, as on ADMIN_PORT). */
export function probes(
  sources: ProbeSources,
): (request: HttpRequest, path: string) => MaybePromise<WholeAnswer> | undefined {
  return (request, path) =>
    request.http.method === 'GET' || request.http.method === 'HEAD' ? probeAnswer(path, sources) : undefined;
}
