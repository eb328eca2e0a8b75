import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';

type Hook = 'onRequestParse' | 'onParams';

/**
 * A library plugin whose refusals clients should read differently (another code or status): the
 * GraphQL errors its hook throws, synchronously or through a promise, go through `recode`;
 * anything else is rethrown as it was. The check itself stays the library's.
 */
export function withRecodedErrors(plugin: Plugin, hook: Hook, recode: (error: GraphQLError) => GraphQLError | undefined): Plugin {
  const original = plugin[hook] as ((payload: unknown) => unknown) | undefined;
  if (original === undefined) return plugin;
  const rethrow = (error: unknown): never => {
    throw error instanceof GraphQLError ? (recode(error) ?? error) : error;
  };
  const wrapped = (payload: unknown): unknown => {
    let result: unknown;
    try {
      result = original(payload);
    } catch (error) {
      return rethrow(error);
    }
    return result instanceof Promise ? result.catch(rethrow) : result;
  };
  return { ...plugin, [hook]: wrapped } as Plugin;
}
