import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Config } from '../../config.js';
import { tokenCallerOf } from '../callers.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';

/** Where a token learnt in one process is told to the others (Redis pub/sub: shared-state/redis-events.ts). */
export type KnownTokensChannel = Pick<EventTarget, 'addEventListener' | 'dispatchEvent'> & { close(): void };

const LEARNT = 'learnt'; // the channel's event type
/** The Redis sorted set of known tokens (`<token caller> <caller>`, scored by expiry): one key, one slot. */
const KEPT = 'gw:known';
/** A learnt token as it travels and is kept: its caller (`token:` and a base64url SHA-256), and whom it counts as. */
const learnt = /^(token:[A-Za-z0-9_-]{43}) ((?:token|account):[A-Za-z0-9_-]{43})$/;

/** Whom the tokens the gateway's login issued to one account count as: a SHA-256 of the user name (never the name). */
export const accountCallerOf = (account: string): string =>
  `account:${createHash('sha256').update(account.trim().toLowerCase()).digest('base64url')}`;

/**
 * The tokens known to be real (callers of their own: callers.ts), by hash, each with whom it counts as: one the
 * upstream accepted (a 2xx to an operation the contract says checks a token: Get Permissions, Delete Head) as itself;
 * one the gateway's `login` issued as its account, so logging in again buys no new share. Bounded by KNOWN_TOKENS_MAX
 * and KNOWN_TOKENS_TTL_MS; with REDIS_URL kept in Redis and told to the replicas, so a restart or a later replica
 * knows them at once.
 */
export class KnownTokens {
  readonly #known: LRUCache<string, string>;

  constructor(
    private readonly settings: Config['knownTokens'],
    private readonly shared?: { readonly channel: KnownTokensChannel; readonly redis: SharedRedis },
  ) {
    this.#known = new LRUCache({ max: settings.max, ttl: settings.ttlMs, ttlAutopurge: false });
    shared?.channel.addEventListener(LEARNT, (event) => {
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
    this.shared?.channel.dispatchEvent(new CustomEvent(LEARNT, { detail: `${token} ${caller}` }));
    this.#keep(`${token} ${caller}`);
  };

  /** The caller a token (its `token:<hash>`) counts as, once it is known to be real. */
  readonly callerOf = (tokenCaller: string): string | undefined => this.#known.get(tokenCaller);

  /** Some may have expired unseen: ttlAutopurge is off. */
  get size(): number {
    return this.#known.size;
  }

  /** Loads what Redis keeps (KNOWN_TOKENS_MAX, most recent first): a process that starts knows what the fleet knew. */
  async load(): Promise<void> {
    const redis = this.shared?.redis;
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

  /** Keeps a learnt token in Redis with its expiry; what expired or is past the count goes as it is written. */
  #keep(member: string): void {
    const redis = this.shared?.redis;
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
    this.shared?.channel.close();
  }
}
