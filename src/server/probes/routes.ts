import type { WholeAnswer } from '../incoming.js';
import type { MaybePromise } from '../pipeline/stages.js';
import type { HttpRequest } from '../request-state.js';
import { type ProbeSources, probeAnswer } from './answers.js';

/**
 * /health, /ready and /metrics on the public port, for a GET or a HEAD (probes/answers.ts answers
 * them, as it does on ADMIN_PORT); undefined for any other request.
 */
export function probes(
  sources: ProbeSources,
): (request: HttpRequest, path: string) => MaybePromise<WholeAnswer> | undefined {
  return (request, path) =>
    request.http.method === 'GET' || request.http.method === 'HEAD' ? probeAnswer(path, sources) : undefined;
}
