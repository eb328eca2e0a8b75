import { type FieldNode, type GraphQLSchema, getArgumentValues, Kind } from 'graphql';
import type { Config } from '../../config.js';
import type { OperationState } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import { rateLimited } from './caller-limits.js';
import { accountCallerOf } from './known-tokens.js';
import { type Limiter, limiter, take, waitOf } from './limiters.js';

/** The window of the login limits: a minute. */
const WINDOW_SECONDS = 60;

/** The user names an operation's `login` fields ask for (each alias one), read from the document and its variables. */
function loginsOf(schema: GraphQLSchema, operation: OperationState): string[] {
  const definition = operation.definition;
  const field = schema.getMutationType()?.getFields().login;
  if (definition?.operation !== 'mutation' || field === undefined) return [];
  const asked = definition.selectionSet.selections.filter(
    (selection): selection is FieldNode => selection.kind === Kind.FIELD && selection.name.value === 'login',
  );
  return asked.flatMap((node) => {
    try {
      const { input } = getArgumentValues(field, node, operation.params.variables ?? undefined) as {
        input?: { username?: unknown };
      };
      return typeof input?.username === 'string' ? [input.username] : [];
    } catch {
      // Arguments that do not coerce are execution's to refuse.
      return [];
    }
  });
}

/**
 * Logins through the gateway's `login` (the OAuth2 password flow), limited before any upstream
 * call: each account (by a hash of its user name: the name is never kept) RATE_LIMIT_LOGINS_PER_MINUTE
 * a minute, each client address RATE_LIMIT_ADDRESS_LOGINS_PER_MINUTE, in Redis when there is one.
 * Every token a login issues to one account counts as that account (known-tokens.ts), so logging
 * in again buys no share of any other limit; these bound the guessing and the tokens one caller
 * can mint. A refusal is RATE_LIMITED with `limit: "logins"`, as the other caller limits'. Its
 * counters are made with the first login (a gateway nobody logs in through carries none).
 */
export function useLoginLimits(options: {
  readonly schema: GraphQLSchema;
  readonly settings: Config['logins'];
  readonly redis: SharedRedis | undefined;
  readonly onRefused?: () => void;
}): Policy {
  const { schema, settings } = options;
  let limiters: { readonly account: Limiter; readonly address: Limiter } | undefined;
  const limitersNow = () =>
    (limiters ??= {
      account: limiter('logins', settings.perAccountPerMinute, WINDOW_SECONDS, options.redis),
      address: limiter('address-logins', settings.perAddressPerMinute, WINDOW_SECONDS, options.redis),
    });
  return {
    name: 'login limits',
    async admission(operation) {
      const accounts = loginsOf(schema, operation);
      if (accounts.length === 0) return undefined;
      const { account, address } = limitersNow();
      let wait = waitOf(address, await take(address, operation.request.caller.address, accounts.length));
      for (let i = 0; wait === undefined && i < accounts.length; i++)
        wait = waitOf(account, await take(account, accountCallerOf(accounts[i]!), 1));
      if (wait === undefined) return undefined;
      options.onRefused?.();
      return rateLimited('logins', wait);
    },
  };
}
