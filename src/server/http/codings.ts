import Negotiator from 'negotiator';

/** The codings the compressor writes, and `identity`. */
const codings = ['br', 'gzip', 'deflate', 'identity'];

/** A `q=0` somewhere in Accept-Encoding: only then can it refuse `identity` (most headers have none). */
const zeroQuality = /;\s*q\s*=\s*0(\.0*)?\s*(,|$)/i;

/** Per Accept-Encoding: `compressed` if `identity` is refused (RFC 9110 12.5.3), `none` if every coding is (406). */
export function codingsFor(acceptEncoding: string | null | undefined): 'any' | 'compressed' | 'none' {
  if (!acceptEncoding || !zeroQuality.test(acceptEncoding)) return 'any';
  const acceptable = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } }).encodings(codings);
  return acceptable.length === 0 ? 'none' : acceptable.includes('identity') ? 'any' : 'compressed';
}
