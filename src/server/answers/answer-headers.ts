import { privateAnswerHeaders, varyOn } from '../http/cache-headers.js';
import type { Policy } from '../pipeline/stages.js';

/** A JSON answer: the same operation as multipart/mixed or an event stream is another body. */
const jsonAnswer = /^application\/(graphql-response\+)?json\b/;
const privateDirective = /(^|,)\s*private\b/i;

/**
 * The one rule of what every answer says to HTTP caches, the answer stage's last step: the response cache's headers on
 * its 200 JSON or 304 (a stale one, served past its TTL for a failed read: `Age`, RFC 9111 5.1, 4.2.3: with `max-age=0`
 * a cache sees it stale); SSE's `no-cache` (the spec's advice); `Vary: Origin` with CORS on, `private, no-store` with
 * `Authorization`: else a shared cache could hand one's answer to another.
 */
export function useAnswerHeaders(options: { readonly cors: boolean }): Policy {
  return {
    name: 'cache headers',
    answer(request, answer) {
      const { headers, status } = answer;
      const type = headers.get('content-type') ?? '';
      const credentials = request.headers.has('authorization');
      const cached = request.cacheable;
      let cacheControl = headers.get('cache-control');
      let vary = headers.get('vary');
      if (cached && (status === 304 || (status === 200 && jsonAnswer.test(type)))) {
        headers.set('etag', cached.tag);
        if (cached.stale !== undefined) headers.set('age', String(cached.stale.ageSeconds));
        cacheControl = `${credentials ? 'private' : 'public'}, max-age=${cached.maxAge}`;
        vary = varyOn(varyOn(vary, 'Authorization'), 'Accept');
      }
      if (type.startsWith('text/event-stream')) cacheControl ??= 'no-cache';
      if (options.cors) vary = varyOn(vary, 'Origin');
      if (credentials) {
        if (cacheControl === undefined || !privateDirective.test(cacheControl))
          cacheControl = privateAnswerHeaders['cache-control'];
        vary = varyOn(vary, privateAnswerHeaders.vary);
      }
      if (cacheControl !== undefined) headers.set('cache-control', cacheControl);
      if (vary !== undefined) headers.set('vary', vary);
    },
  };
}
