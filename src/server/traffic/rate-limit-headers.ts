import type { RateLimiterRes } from 'rate-limiter-flexible';
import { serializeList, serializeString } from 'structured-headers';
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

/** One policy: its name (`extensions.limit`) quoted as a structured-field string, and its quota per window. */
interface Policy {
  readonly quoted: string;
  readonly quota: number;
}

/**
 * An answer's rate-limit headers, from what the limiters said (no count of their own), in both forms clients read:
 * - draft-ietf-httpapi-ratelimit-headers-08 and later: `RateLimit-Policy: "requests";q=10;w=2` (every advertised
 *   limit set) and `RateLimit: "requests";r=7;t=2` (each counted: what is left, seconds before the window turns);
 * - the earlier drafts' `RateLimit-Limit`, `-Remaining` and `-Reset` of the limit closest to its end, as they ask.
 */
export class RateLimitHeaders {
  readonly #policy: string;
  readonly #requests: Policy | undefined;
  readonly #address: Policy | undefined;

  /** `undefined` when none of `limiters` is advertised: there is nothing to say. */
  static of(limiters: Partial<Record<AdvertisedLimit, Limiter | undefined>>): RateLimitHeaders | undefined {
    return limiters.requests === undefined && limiters.address === undefined
      ? undefined
      : new RateLimitHeaders(limiters);
  }

  private constructor(limiters: Partial<Record<AdvertisedLimit, Limiter | undefined>>) {
    const policy = (name: AdvertisedLimit, limiter: Limiter | undefined): Policy | undefined =>
      limiter === undefined ? undefined : { quoted: serializeString(name), quota: limiter.points };
    this.#requests = policy('requests', limiters.requests);
    this.#address = policy('address', limiters.address);
    const set = Object.entries(limiters).filter((entry): entry is [AdvertisedLimit, Limiter] => entry[1] !== undefined);
    this.#policy = serializeList(
      set.map(([name, { points, duration }]) => [name, new Map(Object.entries({ q: points, w: duration }))]),
    );
  }

  /** Sets the headers of what the limiters said of a request's operations; none when no advertised limit counted. */
  write(quotas: Quotas, headers: { set(name: string, value: string): unknown }): void {
    const requests = this.#requests && quotas.requests;
    const address = this.#address && quotas.address;
    if (requests === undefined && address === undefined) return;
    const items: string[] = [];
    if (requests !== undefined) items.push(item(this.#requests!, requests));
    if (address !== undefined) items.push(item(this.#address!, address));
    headers.set('ratelimit-policy', this.#policy);
    headers.set('ratelimit', items.join(', '));
    const byAddress =
      address !== undefined && (requests === undefined || address.remainingPoints < requests.remainingPoints);
    const closest = byAddress ? address : requests!;
    headers.set('ratelimit-limit', String((byAddress ? this.#address! : this.#requests!).quota));
    headers.set('ratelimit-remaining', String(closest.remainingPoints));
    headers.set('ratelimit-reset', String(seconds(closest.msBeforeNext)));
  }
}

/** One policy's state, `"name";r=<left>;t=<seconds>`, as serializeList writes it but the name quoted once. */
function item(policy: Policy, said: Said): string {
  return `${policy.quoted};r=${said.remainingPoints};t=${seconds(said.msBeforeNext)}`;
}
