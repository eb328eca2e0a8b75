import { getCORSHeadersByRequestAndOptions } from '@whatwg-node/server';
import type { WholeAnswer } from '../incoming.js';
import type { Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import { rateLimitHeaderNames } from '../traffic/rate-limit-headers.js';

/** What a browser app may read of an answer besides the CORS-safelisted headers. */
const exposedHeaders = ['x-request-id', 'retry-after', ...rateLimitHeaderNames];

/**
 * CORS, on every answer (the GraphQL endpoint's, the pages' and probes', refusals included): same
 * origin only unless CORS_ORIGINS lists the browser apps allowed to call us. A request from an
 * origin not listed gets no CORS headers at all (naming another origin would leak the list);
 * credentials (the Authorization header) only for origins named explicitly, never for `*`. The
 * headers are @whatwg-node/server's (yoga's CORS); `preflight` answers an OPTIONS request, on
 * any path, 204 with them.
 */
export function useCors(origins: readonly string[]): (Policy & { readonly preflight: WholeAnswer }) | undefined {
  if (origins.length === 0) return undefined;
  const anyOrigin = origins.includes('*');
  const policyFor = (request: RequestState) => {
    const origin = request.headers.get('origin');
    if (origin === null || !(anyOrigin || origins.includes(origin))) return false;
    return { origin, credentials: !anyOrigin, methods: ['GET', 'POST'], exposedHeaders };
  };
  return {
    name: 'cors',
    answer(request, answer) {
      const headers = getCORSHeadersByRequestAndOptions(request.asRequest as unknown as Request, policyFor(request));
      for (const [name, value] of Object.entries(headers ?? {})) {
        const key = name.toLowerCase();
        // Vary has one writer, the cache headers' rule (answers/answer-headers.ts: Origin with CORS on).
        if (key !== 'vary') answer.headers.set(key, value);
      }
    },
    // Safari (and maybe others) wait for a body on a 204 without a Content-Length of 0.
    // Its allowed headers echo the request's: it varies on them too (and on Origin, answers/answer-headers.ts).
    preflight: { status: 204, headers: { 'content-length': '0', vary: 'Access-Control-Request-Headers' }, body: null },
  };
}
