import { privateAnswerHeaders, varyOn } from '../http/cache-headers.js';
import type { Policy } from '../pipeline/stages.js';
import type { Cacheable } from '../request-state.js';

/** A JSON answer: the same operation as multipart/mixed or an event stream is another body. */
const jsonAnswer = /^application\/(graphql-response\+)?json\b/;
const privateDirective = /(^|,)\s*private\b/i;

export interface AnswerFacts {
  readonly cacheable: Cacheable | undefined;
  /** The request carries `Authorization`. */
  readonly credentials: boolean;
  /** CORS is on (CORS_ORIGINS). */
  readonly cors: boolean;
  /** A 200 JSON answer, or a 304: what a cacheable answer's headers go on. */
  readonly json: boolean;
  /** An event stream: its parts are this request's alone. */
  readonly events: boolean;
}

export interface CacheHeaders {
  etag?: string;
  /** A stale answer's seconds since stored (RFC 9111 5.1, 4.2.3: with `max-age=0` a cache sees it stale). */
  age?: string;
  cacheControl: string | null;
  vary: string | null;
}

/**
 * The one rule of what every answer says to HTTP caches (useAnswerHeaders): the response cache's headers on its JSON
 * (a stale one, served past its TTL for a failed read: `Age`); SSE's `no-cache` (the spec's advice); `Vary: Origin`
 * with CORS on, `private, no-store` with `Authorization`: else a shared cache could hand one's answer to another.
 */
export function cacheHeaders(headers: CacheHeaders, facts: AnswerFacts): CacheHeaders {
  const answer = facts.cacheable;
  if (answer && facts.json) {
    headers.etag = answer.tag;
    if (answer.stale !== undefined) headers.age = String(answer.stale.ageSeconds);
    headers.cacheControl = `${facts.credentials ? 'private' : 'public'}, max-age=${answer.maxAge}`;
    headers.vary = varyOn(varyOn(headers.vary, 'Authorization'), 'Accept');
  }
  if (facts.events) headers.cacheControl ??= 'no-cache';
  if (facts.cors) headers.vary = varyOn(headers.vary, 'Origin');
  if (!facts.credentials) return headers;
  if (headers.cacheControl === null || !privateDirective.test(headers.cacheControl))
    headers.cacheControl = privateAnswerHeaders['cache-control'];
  headers.vary = varyOn(headers.vary, privateAnswerHeaders.vary);
  return headers;
}

/** `cacheHeaders` on every answer: the answer stage's last step. */
export function useAnswerHeaders(options: { readonly cors: boolean }): Policy {
  return {
    name: 'cache headers',
    answer(request, answer) {
      const { headers } = answer;
      const type = headers.get('content-type') ?? '';
      const after = cacheHeaders(
        { cacheControl: headers.get('cache-control') ?? null, vary: headers.get('vary') ?? null },
        {
          cacheable: request.cacheable,
          credentials: request.headers.has('authorization'),
          cors: options.cors,
          json: answer.status === 304 || (answer.status === 200 && jsonAnswer.test(type)),
          events: type.startsWith('text/event-stream'),
        },
      );
      if (after.etag !== undefined) headers.set('etag', after.etag);
      if (after.age !== undefined) headers.set('age', after.age);
      if (after.cacheControl !== null) headers.set('cache-control', after.cacheControl);
      if (after.vary !== null) headers.set('vary', after.vary);
    },
  };
}
