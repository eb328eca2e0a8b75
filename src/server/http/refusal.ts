import { GraphQLError } from 'graphql';
import { serialise } from './serialisation.js';

export const refusalType = 'application/json; charset=utf-8';

/** A refusal's body: one GraphQL error with its code, in plain JSON every client reads, serialised as every answer. */
export function refusalBody(message: string, code: string, extensions: Record<string, unknown> = {}): string {
  return serialise({ errors: [new GraphQLError(message, { extensions: { code, ...extensions } })] });
}

/** A refusal's errors (a step's, or a whole answer's JSON's), for a transport that sends results itself. */
export function refusalErrors(
  refusal: GraphQLError | { readonly body: string | null } | undefined,
): readonly GraphQLError[] {
  if (refusal instanceof GraphQLError) return [refusal];
  const { errors = [] } = JSON.parse(refusal?.body ?? '{}') as {
    errors?: { message: string; extensions?: Record<string, unknown> }[];
  };
  return errors.map((error) => new GraphQLError(error.message, { extensions: error.extensions }));
}
