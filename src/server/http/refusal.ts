import type { IncomingMessage } from 'node:http';

/** What the HTTP server asks before handing a request to yoga (the shedder, the caller limits): a refusal to answer at once, or nothing. */
export type EarlyRefusal = (request: IncomingMessage) => { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: string } | undefined;

/** The content type of a refusal answered at once. */
export const refusalType = 'application/json; charset=utf-8';

/**
 * The body of a refusal answered at once, before yoga has chosen a media type (or when the client
 * accepts none it has): plain JSON every client reads, a GraphQL error with its code.
 */
export function refusalBody(message: string, code: string, extensions: Record<string, unknown> = {}): string {
  return JSON.stringify({ errors: [{ message, extensions: { code, ...extensions } }] });
}
