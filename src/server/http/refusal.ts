/** The content type of a refusal answered at once. */
export const refusalType = 'application/json; charset=utf-8';

/**
 * The body of a refusal answered at once, before yoga has chosen a media type (or when the client
 * accepts none it has): plain JSON every client reads, a GraphQL error with its code.
 */
export function refusalBody(message: string, code: string, extensions: Record<string, unknown> = {}): string {
  return JSON.stringify({ errors: [{ message, extensions: { code, ...extensions } }] });
}
