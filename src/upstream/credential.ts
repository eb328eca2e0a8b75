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
