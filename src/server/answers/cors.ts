import type { CORSOptions } from 'graphql-yoga';
import { rateLimitHeaderNames } from '../traffic/rate-limit-headers.js';

/** What a browser app may read of an answer besides the CORS-safelisted headers. */
const exposedHeaders = ['x-request-id', 'retry-after', ...rateLimitHeaderNames];

/**
 * Same-origin only unless CORS_ORIGINS lists the browser apps allowed to call us. A request from
 * an origin not listed gets no CORS headers at all (naming another origin would leak the list).
 */
export function corsPolicy(origins: readonly string[]): ((request: Request) => CORSOptions | false) | false {
  if (origins.length === 0) return false;
  const anyOrigin = origins.includes('*');
  return (request: Request) => {
    const origin = request.headers.get('origin');
    if (origin === null || !(anyOrigin || origins.includes(origin))) return false;
    // Credentials (the Authorization header) only for origins named explicitly, never for `*`.
    return { origin, credentials: !anyOrigin, methods: ['GET', 'POST'], exposedHeaders };
  };
}
