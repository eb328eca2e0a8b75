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

/**
 * The errors of a request's refusal (a step's GraphQL error, or a whole answer's JSON body's errors): what a transport
 * that sends results itself sends of it.
 */
export function refusalErrors(
  refusal: GraphQLError | { readonly body: string | null } | undefined,
): readonly GraphQLError[] {
  if (refusal instanceof GraphQLError) return [refusal];
  const errors =
    (
      JSON.parse(refusal?.body ?? '{"errors":[]}') as {
        errors?: { message: string; extensions?: Record<string, unknown> }[];
      }
    ).errors ?? [];
  return errors.map((error) => new GraphQLError(error.message, { extensions: error.extensions }));
}
