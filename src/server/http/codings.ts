import Negotiator from 'negotiator';

/** The content codings the compressor writes, and `identity`: none. */
const codings = ['br', 'gzip', 'deflate', 'identity'];

/** A `q=0` somewhere in Accept-Encoding: only then can it refuse `identity` (most headers have none). */
const zeroQuality = /;\s*q\s*=\s*0(\.0*)?\s*(,|$)/i;

/**
 * How an answer may be coded, by Accept-Encoding (negotiator, as the compressor reads it):
 * `any`, including as it is; `compressed`, when it refuses `identity` (`identity;q=0`, or `*;q=0`
 * without `identity`: RFC 9110 12.5.3), so even an answer under the threshold is compressed;
 * `none` when it refuses every coding the gateway has: the intake stage answers it 406
 * (answers/negotiation.ts), before anything runs.
 */
export function codingsFor(acceptEncoding: string | null | undefined): 'any' | 'compressed' | 'none' {
  if (!acceptEncoding || !zeroQuality.test(acceptEncoding)) return 'any';
  const acceptable = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } }).encodings(codings);
  return acceptable.length === 0 ? 'none' : acceptable.includes('identity') ? 'any' : 'compressed';
}
