import { LRUCache } from 'lru-cache';
import type { Config } from '../../config.js';
import { tokenCallerOf } from '../callers.js';

/**
 * The tokens known to be real, by their hash (`tokenCallerOf`: the token itself is never kept):
 * one the upstream accepted (a 2xx to an operation the contract says checks a token: Get
 * Permissions, Delete Head), or one the gateway's `login` issued. A known token is a caller of its
 * own for the limits and shedding (callers.ts); until then it shares its address's share, so an
 * address that makes up a token per request still holds one share. Bounded by count
 * (KNOWN_TOKENS_MAX, the least recently learnt forgotten first) and time (KNOWN_TOKENS_TTL_MS);
 * per process: a token learnt at one replica is learnt at another by its next such call there.
 */
export class KnownTokens {
  readonly #known: LRUCache<string, true>;

  constructor(settings: Config['knownTokens']) {
    this.#known = new LRUCache({ max: settings.max, ttl: settings.ttlMs, ttlAutopurge: false });
  }

  /** The upstream accepted `authorization`, or the gateway issued it (`Bearer <token>`). */
  readonly learn = (authorization: string): void => {
    const caller = tokenCallerOf(authorization);
    if (caller !== undefined) this.#known.set(caller, true);
  };

  readonly knows = (tokenCaller: string): boolean => this.#known.has(tokenCaller);
}
