import { type FieldNode, type GraphQLSchema, getArgumentValues, Kind } from 'graphql';
import type { Config } from '../../config.js';
import type { OperationState } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import { rateLimited } from './caller-limits.js';
import { accountCallerOf } from './known-tokens.js';
import { type Limiter, limiter, take, waitOf } from './limiters.js';

const WINDOW_SECONDS = 60;

/** The user names an operation's `login` fields ask for (each alias one), read from the document and its variables. */
function loginsOf(schema: GraphQLSchema, operation: OperationState): string[] {
  const { definition } = operation;
  const field = schema.getMutationType()?.getFields().login;
  if (definition?.operation !== 'mutation' || field === undefined) return [];
  return definition.selectionSet.selections
    .filter((selection): selection is FieldNode => selection.kind === Kind.FIELD && selection.name.value === 'login')
    .flatMap((node) => {
      try {
        const { input } = getArgumentValues(field, node, operation.params.variables ?? undefined) as {
          input?: { username?: unknown };
        };
        return typeof input?.username === 'string' ? [input.username] : [];
      } catch {
        return []; // Arguments that do not coerce are execution's to refuse.
      }
    });
}

/**
 * Logins through the gateway's `login` (the OAuth2 password flow), limited before any upstream call: per account
 * (by a hash of the user name) RATE_LIMIT_LOGINS_PER_MINUTE, per address RATE_LIMIT_ADDRESS_LOGINS_PER_MINUTE. These
 * bound the guessing and the tokens a caller can mint. The counters come with the first login.
 */
export function useLoginLimits(options: {
  readonly schema: GraphQLSchema;
  readonly settings: Config['logins'];
  readonly redis: SharedRedis | undefined;
  readonly onRefused?: () => void;
}): Policy {
  const { schema, settings, redis } = options;
  let limiters: { readonly account: Limiter; readonly address: Limiter } | undefined;
  return {
    name: 'login limits',
    async admission(operation) {
      const accounts = loginsOf(schema, operation);
      if (accounts.length === 0) return undefined;
      limiters ??= {
        account: limiter('logins', settings.perAccountPerMinute, WINDOW_SECONDS, redis),
        address: limiter('address-logins', settings.perAddressPerMinute, WINDOW_SECONDS, redis),
      };
      const { account, address } = limiters;
      let wait = waitOf(address, await take(address, operation.request.caller.address, accounts.length));
      for (let i = 0; wait === undefined && i < accounts.length; i++)
        wait = waitOf(account, await take(account, accountCallerOf(accounts[i]!), 1));
      if (wait === undefined) return undefined;
      options.onRefused?.();
      return rateLimited('logins', wait);
    },
  };
}
