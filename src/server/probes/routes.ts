import type { WholeAnswer } from '../incoming.js';
import type { MaybePromise } from '../pipeline/stages.js';
import type { HttpRequest } from '../request-state.js';
import type { StatusPage } from '../status/page.js';
import { type ProbeSources, probeOrStatus } from './answers.js';

/** The probes on the public port, as on ADMIN_PORT, and the status page where STATUS_PAGE_PUBLIC puts it (`status`). */
export function probes(
  sources: ProbeSources,
  status?: StatusPage,
): (request: HttpRequest, path: string) => MaybePromise<WholeAnswer> | undefined {
  return (request, path) => probeOrStatus(request.http.method, path, sources, status);
}
