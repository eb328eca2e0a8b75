import { credentialKeyOf } from '../upstream/credential.js';

/**
 * The caller an Authorization header names, `token:<SHA-256 of its normalised credential>`, or
 * undefined without one: what the caller limits count by and the response cache scopes answers
 * by. The token itself is never kept, in memory or in Redis.
 */
export function tokenCallerOf(authorization: string | undefined): string | undefined {
  const key = credentialKeyOf(authorization);
  return key === undefined ? undefined : `token:${key}`;
}

/** Whom an operation is charged to (traffic/caller-limits.ts, and its share under load: traffic/load-shedder.ts). */
export interface Caller {
  /** `token:<hash of the normalised credential>`, or else the client address. */
  readonly key: string;
  /** `address:<client address>`: what the per-address limit counts. */
  readonly address: string;
  /** Its `token:<hash>` (tokenCallerOf), when it sent a credential: the response cache's scope. */
  readonly token: string | undefined;
}

/**
 * Whom an operation is charged to: its bearer token, hashed (`tokenCaller`, from tokenCallerOf),
 * or else its client address: the first X-Forwarded-For hop when a proxy in front sets it
 * (TRUST_PROXY), the connection's peer otherwise.
 */
export function callerFrom(tokenCaller: string | undefined, forwardedFor: string | undefined, peer: string | undefined, trustProxy: boolean): Caller {
  const forwarded = trustProxy ? forwardedFor?.split(',')[0]?.trim() : undefined;
  const address = `address:${forwarded || peer || 'unknown'}`;
  return { key: tokenCaller ?? address, address, token: tokenCaller };
}
