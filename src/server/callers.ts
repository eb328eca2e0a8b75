import type { IncomingMessage } from 'node:http';
import proxyaddr from 'proxy-addr';
import type { Config } from '../config.js';
import { credentialKeyOf } from '../upstream/credential.js';

/**
 * The caller an Authorization header names, `token:<SHA-256 of its normalised credential>`, or undefined without one:
 * what the caller limits count by and the response cache scopes answers by. The token itself is never kept.
 */
export function tokenCallerOf(authorization: string | undefined): string | undefined {
  const key = credentialKeyOf(authorization);
  return key === undefined ? undefined : `token:${key}`;
}

/** Whom an operation is charged to (traffic/caller-limits.ts, and its share under load: traffic/load-shedder.ts). */
export interface Caller {
  /**
   * What the per-caller limits count by: once its token is known to be real, the caller it counts as (its
   * `token:<hash>`, or `account:<hash>` for every token the login issued to one account), else its `address`.
   */
  readonly key: string;
  /** `address:<client address>`: what the per-address limit counts. */
  readonly address: string;
  /** Its `token:<hash>` (tokenCallerOf), when it sent a credential: the response cache's scope. */
  readonly token: string | undefined;
  /** Its token is known to be real (traffic/known-tokens.ts): it is judged by its own share, not its address's. */
  readonly known: boolean;
}

/** How a request's caller is told: its address (TRUST_PROXY), and which tokens are known to be real. */
export interface CallerRules {
  /** Which proxies in front may name the client address (TRUST_PROXY), as `trustingProxies` compiled it. */
  readonly trustProxy: ProxyTrusted | undefined;
  /** The caller a token (its `token:<hash>`) counts as once it is known to be real: itself, or its login's account. */
  readonly callerOf: (tokenCaller: string) => string | undefined;
}

/** Whether hop `i` from the connection (0: the peer itself) at `address` is a proxy trusted to name the one before. */
export type ProxyTrusted = (address: string, i: number) => boolean;

/** TRUST_PROXY as proxy-addr judges each hop (Express's `trust proxy`): none, all, the nearest N, or by address. */
export function trustingProxies(trust: Config['callerLimits']['trustProxy']): ProxyTrusted | undefined {
  if (trust === false) return undefined;
  if (trust === true) return () => true;
  if (typeof trust === 'number') return (_address, i) => i < trust;
  return proxyaddr.compile([...trust]);
}

/** The client address: the nearest `X-Forwarded-For` hop not sent by a trusted proxy (proxy-addr), else the peer. */
function clientAddress(
  forwardedFor: string | undefined,
  peer: string | undefined,
  trusted: ProxyTrusted | undefined,
): string | undefined {
  if (trusted === undefined || forwardedFor === undefined) return peer;
  const request = {
    headers: { 'x-forwarded-for': forwardedFor },
    socket: { remoteAddress: peer },
  } as unknown as IncomingMessage;
  return proxyaddr(request, trusted) || peer;
}

/**
 * Whom an operation is charged to: its token's caller once the token is known to be real, else its client address. A
 * known caller is judged by its own share alone (the per-address limit does not bind it), so users behind one address
 * each keep theirs; any other shares its address's, so one address making up tokens still has one.
 */
export function callerFrom(
  tokenCaller: string | undefined,
  forwardedFor: string | undefined,
  peer: string | undefined,
  rules: CallerRules,
): Caller {
  const address = `address:${clientAddress(forwardedFor, peer, rules.trustProxy) || 'unknown'}`;
  const counted = tokenCaller === undefined ? undefined : rules.callerOf(tokenCaller);
  return { key: counted ?? address, address, token: tokenCaller, known: counted !== undefined };
}
