import { type LoginDto, loginResponseSchema } from './schemas.js';
import type { UpstreamCaller } from './transport.js';

/** The OAuth2 password flow's token address (contract 5): form in, bearer token out. Never retried. */
export function login(
  caller: UpstreamCaller,
  credentials: { readonly username: string; readonly password: string },
): Promise<LoginDto> {
  return caller.call({
    operation: 'login',
    form: { username: credentials.username, password: credentials.password, grant_type: 'password' },
    schema: loginResponseSchema,
    issuesToken: (dto) => ({ token: dto.access_token, account: credentials.username }),
  });
}
