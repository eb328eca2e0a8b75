import type { RateLimiterRes } from 'rate-limiter-flexible';
import { serializeList } from 'structured-headers';
import type { Limiter } from './limiters.js';

/**
 * The limits an answer tells a client about: those counting its operations. Upstream calls are spent in a unit a
 * client cannot count, and an in-flight slot is back by the time the answer goes: both still refuse with 429.
 */
export type AdvertisedLimit = 'requests' | 'address';

/** The headers an answer may carry, which a browser app may read (CORS). */
export const rateLimitHeaderNames: readonly string[] = [
  'ratelimit-policy',
  'ratelimit',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
];

type Said = Pick<RateLimiterRes, 'remainingPoints' | 'msBeforeNext'>;
/** What the limiters last said of a request's operations (a batch's last): its request state's `quotas`. */
type Quotas = { readonly [limit in AdvertisedLimit]?: Said | undefined };

const seconds = (ms: number) => Math.max(0, Math.ceil(ms / 1000));

/**
 * An answer's rate-limit headers, from what the limiters said (no count of their own), in both forms clients read:
 * - draft-ietf-httpapi-ratelimit-headers-08 and later: `RateLimit-Policy: "requests";q=10;w=2` (every advertised
 *   limit set) and `RateLimit: "requests";r=7;t=2` (each counted: what is left, seconds before the window turns);
 * - the earlier drafts' `RateLimit-Limit`, `-Remaining` and `-Reset` of the limit closest to its end, as they ask.
 */
export class RateLimitHeaders {
  readonly #policy: string;

  /** `undefined` when none of `limiters` is advertised: there is nothing to say. */
  static of(limiters: Partial<Record<AdvertisedLimit, Limiter | undefined>>): RateLimitHeaders | undefined {
    const set = Object.entries(limiters).filter((entry): entry is [AdvertisedLimit, Limiter] => entry[1] !== undefined);
    return set.length === 0 ? undefined : new RateLimitHeaders(set);
  }

  private constructor(private readonly set: readonly [AdvertisedLimit, Limiter][]) {
    this.#policy = serializeList(
      set.map(([name, { points, duration }]) => [name, new Map(Object.entries({ q: points, w: duration }))]),
    );
  }

  /** Sets the headers of what the limiters said of a request's operations; none when no advertised limit counted. */
  write(quotas: Quotas, headers: { set(name: string, value: string): unknown }): void {
    const counted = this.set.flatMap(([name, { points }]) => {
      const said = quotas[name];
      return said === undefined ? [] : [{ name, quota: points, said }];
    });
    if (counted.length === 0) return;
    headers.set('ratelimit-policy', this.#policy);
    // As serializeList writes each (`"name";r=<left>;t=<seconds>`): the names need no escaping.
    const items = counted.map(
      ({ name, said }) => `"${name}";r=${said.remainingPoints};t=${seconds(said.msBeforeNext)}`,
    );
    headers.set('ratelimit', items.join(', '));
    const closest = counted.reduce((first, next) =>
      next.said.remainingPoints < first.said.remainingPoints ? next : first,
    );
    headers.set('ratelimit-limit', String(closest.quota));
    headers.set('ratelimit-remaining', String(closest.said.remainingPoints));
    headers.set('ratelimit-reset', String(seconds(closest.said.msBeforeNext)));
  }
}
