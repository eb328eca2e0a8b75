import type { Plugin } from 'graphql-yoga';
import { privateAnswerHeaders, varyOn } from '../http/cache-headers.js';
import { requestStateOf } from '../request-state.js';

/** A JSON answer: the same operation as multipart/mixed or an event stream is another body. */
const jsonAnswer = /^application\/(graphql-response\+)?json\b/;
const privateDirective = /(^|,)\s*private\b/i;

/**
 * The one writer of what an answer says to HTTP caches, in onResponse, from the request's state:
 * 1. a cacheable JSON answer of the response cache (the state's `cacheable`; a 304 too): its
 *    `ETag`, `Cache-Control: private|public, max-age=<seconds left>` (private with a token) and
 *    `Vary: Authorization, Accept`;
 * 2. with CORS on (`cors`), every answer `Vary: Origin`: an answer depends on the request's Origin
 *    (allowed or not, and which one is echoed), or a shared cache could hand one origin's answer
 *    to another;
 * 3. every answer to a request that carries `Authorization` (a GET's as much as a POST's, refusals
 *    included) `Cache-Control: private, no-store` unless it says `private` already, and
 *    `Vary: Authorization`: without them a shared HTTP cache in between could hand one caller's
 *    answer to another.
 */
export function useAnswerHeaders(options: { readonly cors: boolean }): Plugin {
  const { cors } = options;
  return {
    onResponse({ request, response, serverContext }) {
      const { headers } = response;
      const answer = requestStateOf(serverContext)?.cacheable;
      const credentials = request.headers.has('authorization');
      if (answer && (response.status === 304 || (response.status === 200 && jsonAnswer.test(headers.get('content-type') ?? '')))) {
        headers.set('etag', answer.tag);
        headers.set('cache-control', `${credentials ? 'private' : 'public'}, max-age=${answer.maxAge}`);
        headers.set('vary', varyOn(varyOn(headers.get('vary'), 'Authorization'), 'Accept'));
      }
      if (cors) headers.set('vary', varyOn(headers.get('vary'), 'Origin'));
      if (!credentials) return;
      const cacheControl = headers.get('cache-control');
      if (cacheControl === null || !privateDirective.test(cacheControl)) headers.set('cache-control', privateAnswerHeaders['cache-control']);
      headers.set('vary', varyOn(headers.get('vary'), privateAnswerHeaders.vary));
    },
  };
}
