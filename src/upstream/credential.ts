import { hash } from 'node:crypto';

/** RFC 6750 2.1: `Bearer`, in any case (RFC 9110 11.1), one or more spaces, a token68. */
const bearerCredential = /^bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

/**
 * The credential of an Authorization header, as one caller. A bearer token as RFC 6750 writes it
 * is one caller however its scheme is cased or how many spaces follow it (`Bearer`, `bearer` and
 * `BEARER  ` before one token are one). Anything else (another scheme, a tab where the space
 * goes, a token with characters a token68 has not) is a caller of its own, as sent: never merged
 * with a well-formed token's limits, cache entries or shared calls, since the upstream may read it
 * otherwise (the reference upstream reads `Bearer<TAB>token` as no token). Only keys are made of
 * it: the header goes upstream as the client sent it (the upstream, not the gateway, says which
 * credentials it takes). Undefined without a header, or with an empty one.
 */
export function credentialOf(authorization: string | undefined): string | undefined {
  const value = authorization?.trim();
  if (!value) return undefined;
  const token = bearerCredential.exec(value)?.[1];
  return token === undefined ? `as sent: ${value}` : `bearer ${token}`;
}

/**
 * A caller's key: a SHA-256 of its normalised credential (never the token itself), or undefined
 * without one. The caller limits, the response cache's scope and shared upstream calls all key by it.
 */
export function credentialKeyOf(authorization: string | undefined): string | undefined {
  const credential = credentialOf(authorization);
  return credential === undefined ? undefined : hash('sha256', credential, 'base64url');
}
