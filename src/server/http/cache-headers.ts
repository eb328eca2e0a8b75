import vary from 'vary';

/**
 * What an answer to a request with credentials says to caches: no shared cache may keep it, and
 * it depends on the Authorization header. (A response cache of ours says `private, max-age=N`
 * instead: an answer that already says `private` is left as it is.) The HTTP server's early
 * refusals and every answer through yoga (answers/answer-headers.ts) say it alike.
 */
export const privateAnswerHeaders = { 'cache-control': 'private, no-store', vary: 'Authorization' } as const;

/** A Vary header with `name` merged in (kept as it is when it names it already, or `*`). */
export const varyOn = (header: string | null | undefined, name: string): string => vary.append(header ?? '', name);
