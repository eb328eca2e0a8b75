import type { Plugin } from 'graphql-yoga';

/**
 * What an answer to a request with credentials says to caches: no shared cache may keep it, and
 * it depends on the Authorization header. (A response cache of ours would say
 * `private, max-age=N` instead: an answer that already says `private` is left as it is.)
 */
export const privateAnswerHeaders = { 'cache-control': 'private, no-store', vary: 'Authorization' } as const;

/** A Vary header with `name` merged in (kept as it is when it names it already, or `*`). */
export function varyOn(vary: string | null, name: string): string {
  if (vary === null || vary.trim() === '') return name;
  const lower = name.toLowerCase();
  const named = vary.split(',').some((field) => {
    const value = field.trim().toLowerCase();
    return value === lower || value === '*';
  });
  return named ? vary : `${vary}, ${name}`;
}

/**
 * Every answer to a request that carries `Authorization` (a GET's as much as a POST's, refusals
 * included) says `Cache-Control: private, no-store` and `Vary: Authorization`: without them a
 * shared HTTP cache in between could hand one caller's answer to another.
 */
export function usePrivateAnswers(): Plugin {
  return {
    onResponse({ request, response }) {
      if (!request.headers.has('authorization')) return;
      const cacheControl = response.headers.get('cache-control');
      if (cacheControl === null || !/(^|,)\s*private\b/i.test(cacheControl)) response.headers.set('cache-control', privateAnswerHeaders['cache-control']);
      response.headers.set('vary', varyOn(response.headers.get('vary'), privateAnswerHeaders.vary));
    },
  };
}
