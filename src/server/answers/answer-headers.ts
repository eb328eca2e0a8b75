import { privateAnswerHeaders, varyOn } from '../http/cache-headers.js';
import type { Policy } from '../pipeline/stages.js';
import type { Cacheable } from '../request-state.js';

/** A JSON answer: the same operation as multipart/mixed or an event stream is another body. */
const jsonAnswer = /^application\/(graphql-response\+)?json\b/;
const privateDirective = /(^|,)\s*private\b/i;

/** What decides an answer's cache headers. */
export interface AnswerFacts {
  /** What the response cache said of it (the request state's `cacheable`). */
  readonly cacheable: Cacheable | undefined;
  /** Its request carries `Authorization`. */
  readonly credentials: boolean;
  /** CORS is on (CORS_ORIGINS). */
  readonly cors: boolean;
  /** A 200 JSON answer, or a 304: what a cacheable answer's headers go on. */
  readonly json: boolean;
  /** An event stream: its parts are this request's alone. */
  readonly events: boolean;
}

/** The cache headers an answer has, and what they become. */
export interface CacheHeaders {
  etag?: string;
  /**
   * Set for a stale answer: seconds since it was stored (RFC 9111 5.1 and 4.2.3; with `max-age=0`, a cache sees it
   * stale).
   */
  age?: string;
  cacheControl: string | null;
  vary: string | null;
}

/**
 * The one rule of what an answer says to HTTP caches, over the headers it has:
 * 1. a cacheable JSON answer of the response cache (a 304 too): its `ETag`,
 *    `Cache-Control: private|public, max-age=<seconds left>` (private with a token) and
 *    `Vary: Authorization, Accept`; a stale one (served past its TTL for a failed read)
 *    `max-age=0` and `Age: <seconds since it was stored>`;
 * 2. an event stream `Cache-Control: no-cache` (the SSE spec's advice: no cache or proxy keeps
 *    the parts of one request for another);
 * 3. with CORS on, every answer `Vary: Origin`: an answer depends on the request's Origin (allowed
 *    or not, and which one is echoed), or a shared cache could hand one origin's answer to another;
 * 4. every answer to a request that carries `Authorization` (a GET's as much as a POST's, refusals
 *    included) `Cache-Control: private, no-store` unless it says `private` already, and
 *    `Vary: Authorization`: without them a shared HTTP cache in between could hand one caller's
 *    answer to another.
 * Every answer gets them from useAnswerHeaders, the last step of the answer stage (the pages' and
 * probes' too).
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

/** The cache headers of every answer, the answer stage's last step, from the request's state (`cacheHeaders`). */
export function useAnswerHeaders(options: { readonly cors: boolean }): Policy {
  const { cors } = options;
  return {
    name: 'cache headers',
    answer(request, answer) {
      const { headers } = answer;
      const type = headers.get('content-type') ?? '';
      const json = answer.status === 304 || (answer.status === 200 && jsonAnswer.test(type));
      const facts = {
        cacheable: request.cacheable,
        credentials: request.headers.has('authorization'),
        cors,
        json,
        events: type.startsWith('text/event-stream'),
      };
      const after = cacheHeaders(
        { cacheControl: headers.get('cache-control') ?? null, vary: headers.get('vary') ?? null },
        facts,
      );
      if (after.etag !== undefined) headers.set('etag', after.etag);
      if (after.age !== undefined) headers.set('age', after.age);
      if (after.cacheControl !== null) headers.set('cache-control', after.cacheControl);
      if (after.vary !== null) headers.set('vary', after.vary);
    },
  };
}
