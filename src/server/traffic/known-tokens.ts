import { LRUCache } from 'lru-cache';
import type { Config } from '../../config.js';
import { tokenCallerOf } from '../callers.js';

/** Where a token learnt in one process is told to the others (Redis pub/sub: shared-state/redis-events.ts). */
export type KnownTokensChannel = Pick<EventTarget, 'addEventListener' | 'dispatchEvent'> & { close(): void };

/** The topic a learnt token's hash travels on. */
const LEARNT = 'learnt';

/** What a learnt token travels as: its caller, `token:` and a SHA-256 in base64url (tokenCallerOf), nothing else. */
const tokenCaller = /^token:[A-Za-z0-9_-]{43}$/;

/**
 * The tokens known to be real, by their hash (`tokenCallerOf`: the token itself is never kept):
 * one the upstream accepted (a 2xx to an operation the contract says checks a token: Get
 * Permissions, Delete Head), or one the gateway's `login` issued. A known token is a caller of its
 * own for the limits and shedding (callers.ts); until then it shares its address's share, so an
 * address that makes up a token per request still holds one share. Bounded by count
 * (KNOWN_TOKENS_MAX, the least recently learnt forgotten first) and time (KNOWN_TOKENS_TTL_MS).
 * With `channel` (REDIS_URL), a token learnt here is told to every other replica once (its hash,
 * when this process had not known it), so a user is a caller of its own at every replica from its
 * first such call at any; a replica started later learns a token at its next such call there.
 */
export class KnownTokens {
  readonly #known: LRUCache<string, true>;
  readonly #channel: KnownTokensChannel | undefined;

  constructor(settings: Config['knownTokens'], channel?: KnownTokensChannel) {
    this.#known = new LRUCache({ max: settings.max, ttl: settings.ttlMs, ttlAutopurge: false });
    this.#channel = channel;
    channel?.addEventListener(LEARNT, (event) => {
      const caller = (event as CustomEvent<unknown>).detail;
      if (typeof caller === 'string' && tokenCaller.test(caller)) this.#known.set(caller, true);
    });
  }

  /** The upstream accepted `authorization`, or the gateway issued it (`Bearer <token>`). */
  readonly learn = (authorization: string): void => {
    const caller = tokenCallerOf(authorization);
    if (caller === undefined) return;
    const fresh = !this.#known.has(caller);
    this.#known.set(caller, true);
    if (fresh) this.#channel?.dispatchEvent(new CustomEvent(LEARNT, { detail: caller }));
  };

  readonly knows = (tokenCaller: string): boolean => this.#known.has(tokenCaller);

  /** How many it knows now (some may have expired unseen: ttlAutopurge is off). */
  get size(): number {
    return this.#known.size;
  }

  /** Stops listening to the other replicas (before Redis closes). */
  close(): void {
    this.#channel?.close();
  }
}
