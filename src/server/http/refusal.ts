import { GraphQLError } from 'graphql';
import { serialise } from './serialisation.js';

export const refusalType = 'application/json; charset=utf-8';

/** A refusal's body: one GraphQL error with its code, in plain JSON every client reads, serialised as every answer. */
export function refusalBody(message: string, code: string, extensions: Record<string, unknown> = {}): string {
  return serialise({ errors: [new GraphQLError(message, { extensions: { code, ...extensions } })] });
}
