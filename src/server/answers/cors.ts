import { getCORSHeadersByRequestAndOptions } from '@whatwg-node/server';
import type { WholeAnswer } from '../incoming.js';
import type { Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import { rateLimitHeaderNames } from '../traffic/rate-limit-headers.js';

/** What a browser app may read of an answer besides the CORS-safelisted headers. */
const exposedHeaders = ['x-request-id', 'retry-after', ...rateLimitHeaderNames];

/** CORS for the apps CORS_ORIGINS lists (none for others: naming one would leak the list), credentials not for `*`. */
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
    // Safari waits for a body on a 204 without `Content-Length: 0`; allowed headers echo the request's: vary on them.
    preflight: { status: 204, headers: { 'content-length': '0', vary: 'Access-Control-Request-Headers' }, body: null },
  };
}
