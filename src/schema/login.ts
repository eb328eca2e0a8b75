import { z } from 'zod';
import { plan } from '../plan/facts.js';
import { login } from '../upstream/auth.js';
import type { LoginDto } from '../upstream/schemas.js';
import { builder } from './builder.js';

const LoginInput = builder.inputType('LoginInput', {
  description: 'Credentials for the OAuth2 password flow.',
  fields: (t) => ({
    username: t.string({ required: true, description: 'User name.', validate: z.string().min(1).max(256) }),
    password: t.string({ required: true, description: 'Password.', validate: z.string().min(1).max(1024) }),
  }),
});

const LoginPayload = builder.objectRef<LoginDto>('LoginPayload').implement({
  description:
    'A bearer token: send it as `Authorization: Bearer <accessToken>` on later requests. The gateway keeps no copy.',
  fields: (t) => ({
    accessToken: t.exposeString('access_token', { description: 'The access token.' }),
    tokenType: t.exposeString('token_type', { description: 'The token type, `bearer`.' }),
  }),
});

builder.mutationField('login', (t) =>
  t.field({
    type: LoginPayload,
    description:
      "Proxies the upstream's OAuth2 password flow, so GraphiQL users can get a token. Sent once, never retried.",
    args: { input: t.arg({ type: LoginInput, required: true, description: 'The credentials.' }) },
    ...plan({ kind: 'call', operation: 'login', needsToken: false }),
    resolve: (_, { input }, ctx) => login(ctx.upstream, input),
  }),
);
