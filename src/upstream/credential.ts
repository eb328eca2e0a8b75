import { hash } from 'node:crypto';

/**
 * The credential of an Authorization header, as one caller: the scheme's case and the whitespace
 * around and between the parts make no other caller (RFC 9110 11.1: the scheme is
 * case-insensitive), or `Bearer`, `bearer` and `BEARER  ` before one token would be three callers.
 * Only keys are made of it: the header goes upstream as the client sent it (the upstream, not the
 * gateway, says which credentials it takes).
 */
export function credentialOf(authorization: string | undefined): string | undefined {
  const [scheme, ...rest] = authorization?.trim().split(/\s+/) ?? [];
  return scheme ? [scheme.toLowerCase(), ...rest].join(' ') : undefined;
}

/**
 * A caller's key: a SHA-256 of its normalised credential (never the token itself), or undefined
 * without one. The caller limits, the response cache's scope and shared upstream calls all key by it.
 */
export function credentialKeyOf(authorization: string | undefined): string | undefined {
  const credential = credentialOf(authorization);
  return credential === undefined ? undefined : hash('sha256', credential, 'base64url');
}
