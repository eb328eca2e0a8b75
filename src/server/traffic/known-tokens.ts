import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Config } from '../../config.js';
import { tokenCallerOf } from '../callers.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';

/** Where a token learnt in one process is told to the others (Redis pub/sub: shared-state/redis-events.ts). */
export type KnownTokensChannel = Pick<EventTarget, 'addEventListener' | 'dispatchEvent'> & { close(): void };

/** The topic a learnt token's hash travels on. */
const LEARNT = 'learnt';

/**
 * The sorted set the known tokens are kept in, in Redis (`<token caller> <caller>`, scored by when each expires): one
 * key, one slot.
 */
const KEPT = 'gw:known';

/**
 * What a learnt token travels and is kept as: its caller (`token:` and a SHA-256 in base64url), and the caller it
 * counts as.
 */
const learnt = /^(token:[A-Za-z0-9_-]{43}) ((?:token|account):[A-Za-z0-9_-]{43})$/;

/**
 * The caller every token the gateway's login issued to one account counts as: `account:` and a SHA-256 of the user name
 * (never the name).
 */
export const accountCallerOf = (account: string): string =>
  `account:${createHash('sha256').update(account.trim().toLowerCase()).digest('base64url')}`;

/**
 * The tokens known to be real, by their hash (`tokenCallerOf`: the token itself is never kept),
 * each with the caller it counts as: one the upstream accepted (a 2xx to an operation the contract
 * says checks a token: Get Permissions, Delete Head) counts as itself; every token the gateway's
 * `login` issued to one account counts as that account (`accountCallerOf`), so logging in again
 * buys no new share. A known token is a caller of its own for the limits and shedding
 * (callers.ts); until then it shares its address's share, so an address that makes up a token per
 * request still holds one share. Bounded by count (KNOWN_TOKENS_MAX, the least recently learnt
 * forgotten first) and time (KNOWN_TOKENS_TTL_MS).
 *
 * With REDIS_URL they outlive the process: each is kept in Redis with its expiry (one sorted set,
 * trimmed to the count as it is written) and loaded as a process starts (`load`), so a restart or a
 * replica that starts later knows them at once; a token learnt here is told to every running
 * replica once (its hash and caller, when this process had not known it).
 */
export class KnownTokens {
  readonly #known: LRUCache<string, string>;
  readonly #channel: KnownTokensChannel | undefined;
  readonly #redis: SharedRedis | undefined;

  constructor(
    private readonly settings: Config['knownTokens'],
    shared?: { readonly channel: KnownTokensChannel; readonly redis: SharedRedis },
  ) {
    this.#known = new LRUCache({ max: settings.max, ttl: settings.ttlMs, ttlAutopurge: false });
    this.#channel = shared?.channel;
    this.#redis = shared?.redis;
    this.#channel?.addEventListener(LEARNT, (event) => {
      const detail = (event as CustomEvent<unknown>).detail;
      const match = typeof detail === 'string' ? learnt.exec(detail) : null;
      if (match !== null) this.#known.set(match[1]!, match[2]!);
    });
  }

  /** The upstream accepted `authorization`, or the gateway's login issued it (`Bearer <token>`) to `account`. */
  readonly learn = (authorization: string, account?: string): void => {
    const token = tokenCallerOf(authorization);
    if (token === undefined) return;
    const caller = account === undefined ? token : accountCallerOf(account);
    const fresh = this.#known.get(token) !== caller;
    this.#known.set(token, caller);
    if (!fresh) return;
    this.#channel?.dispatchEvent(new CustomEvent(LEARNT, { detail: `${token} ${caller}` }));
    this.#keep(`${token} ${caller}`);
  };

  /** The caller a token (its `token:<hash>`) counts as, once it is known to be real. */
  readonly callerOf = (tokenCaller: string): string | undefined => this.#known.get(tokenCaller);

  /** How many it knows now (some may have expired unseen: ttlAutopurge is off). */
  get size(): number {
    return this.#known.size;
  }

  /**
   * What Redis keeps, loaded (the most recently learnt first, KNOWN_TOKENS_MAX at most): a process that starts knows
   * what the fleet knew.
   */
  async load(): Promise<void> {
    const redis = this.#redis;
    if (redis === undefined || !redis.ready()) return;
    const now = Date.now();
    const kept = await redis.client
      .zrevrangebyscore(KEPT, '+inf', `(${now}`, 'WITHSCORES', 'LIMIT', 0, this.settings.max)
      .catch(() => []);
    // Oldest first, so the most recent are the last forgotten.
    for (let i = kept.length - 2; i >= 0; i -= 2) {
      const match = learnt.exec(kept[i]!);
      if (match !== null) this.#known.set(match[1]!, match[2]!, { ttl: Math.max(1, Number(kept[i + 1]) - now) });
    }
  }

  /** Keeps a learnt token in Redis, with its expiry; what expired or is past the count goes as it is written. */
  #keep(member: string): void {
    const redis = this.#redis;
    if (redis === undefined || !redis.ready()) return;
    const now = Date.now();
    void redis.client
      .multi()
      .zadd(KEPT, now + this.settings.ttlMs, member)
      .zremrangebyscore(KEPT, '-inf', now)
      .zremrangebyrank(KEPT, 0, -this.settings.max - 1)
      .pexpire(KEPT, this.settings.ttlMs)
      .exec()
      .catch(() => undefined);
  }

  /** Stops listening to the other replicas (before Redis closes). */
  close(): void {
    this.#channel?.close();
  }
}
