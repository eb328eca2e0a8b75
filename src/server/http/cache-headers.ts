import vary from 'vary';

/** What answers to requests with credentials say to caches (answers/answer-headers.ts): no shared cache keeps them. */
export const privateAnswerHeaders = { 'cache-control': 'private, no-store', vary: 'Authorization' } as const;

/** Merged Vary headers by name merged in, then by header merged into: answers have a handful. */
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
  const known = into.get(before);
  if (known !== undefined) return known;
  const value = vary.append(before, name);
  // At most MERGED kept per name, each of at most 256 characters: a few kB whatever clients send.
  if (before.length <= 256) {
    if (into.size >= MERGED) into.clear();
    into.set(before, value);
  }
  return value;
}
