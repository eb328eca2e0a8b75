import vary from 'vary';

/**
 * What an answer to a request with credentials says to caches: no shared cache may keep it, and
 * it depends on the Authorization header. (A response cache of ours says `private, max-age=N`
 * instead: an answer that already says `private` is left as it is.) The HTTP server's own 406 and
 * every answer of the gateway (answers/answer-headers.ts) say it alike.
 */
export const privateAnswerHeaders = { 'cache-control': 'private, no-store', vary: 'Authorization' } as const;

/**
 * Merged Vary headers, by the name merged in and the header it was merged into: answers have a handful (Authorization,
 * Accept, Origin).
 */
const merged = new Map<string, Map<string, string>>();
const MERGED = 64;

/** A Vary header with `name` merged in (kept as it is when it names it already, or `*`). */
export function varyOn(header: string | null | undefined, name: string): string {
  const before = header ?? '';
  let into = merged.get(name);
  if (into === undefined) {
    into = new Map();
    merged.set(name, into);
  }
  let value = into.get(before);
  if (value === undefined) {
    value = vary.append(before, name);
    // At most MERGED kept per name, each of at most 256 characters: a few kB whatever clients send.
    if (before.length <= 256) {
      if (into.size >= MERGED) into.clear();
      into.set(before, value);
    }
  }
  return value;
}
