import { GraphQLError } from 'graphql';
import { serialise } from './serialisation.js';

/** The content type of a refusal answered at once. */
export const refusalType = 'application/json; charset=utf-8';

/**
 * The body of a refusal of a client that accepts no media type the gateway answers in (406): plain
 * JSON every client reads, a GraphQL error with its code, serialised as every answer is.
 */
export function refusalBody(message: string, code: string, extensions: Record<string, unknown> = {}): string {
  return serialise({ errors: [new GraphQLError(message, { extensions: { code, ...extensions } })] });
}
