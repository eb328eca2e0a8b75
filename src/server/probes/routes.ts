import type { Plugin } from 'graphql-yoga';
import { healthy, probeAnswer, type ProbeAnswer, type ProbeSources } from './answers.js';
import { pathOf } from '../http/paths.js';

const HEALTH = '/health';

/**
 * /health, /ready and /metrics on the public port, for a GET or a HEAD (server/probes/answers.ts answers
 * them, as it does on ADMIN_PORT), before yoga or any other plugin looks at the request.
 */
export function useProbes(sources: ProbeSources): Plugin {
  const respond = (fetchAPI: { Response: typeof Response }, answer: ProbeAnswer): Response => new fetchAPI.Response(answer.body, { status: answer.status, headers: answer.headers });
  return {
    onRequest({ request, fetchAPI, endResponse }) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return;
      // /health answers here when yoga's own health check (default endpoint /health, rewritten
      // in onResponse) is moved elsewhere with `healthCheckEndpoint`.
      const answer = probeAnswer(pathOf(request.url), sources);
      if (answer instanceof Promise) return answer.then((answered) => endResponse(respond(fetchAPI, answered)));
      if (answer !== undefined) endResponse(respond(fetchAPI, answer));
      return;
    },
    onResponse({ request, response, setResponse, fetchAPI }) {
      // yoga's built-in health check answers /health before any plugin sees it, with no body;
      // give it ours (it is the only response carrying x-yoga-id).
      if (response.headers.has('x-yoga-id') && request.url.endsWith(HEALTH)) setResponse(respond(fetchAPI, healthy()));
    },
  };
}
