import etag from 'etag';
import fresh from 'fresh';
import type { GraphiQLOptions } from 'graphql-yoga';
import type { WholeAnswer } from '../incoming.js';
import type { HttpRequest } from '../request-state.js';

type Renderer = (options: GraphiQLOptions) => Promise<string>;

/**
 * The GraphiQL page, at the GraphQL endpoint for a browser's GET: it inlines every asset (some
 * 9 MB of HTML) and is the same for the life of the gateway, so it is rendered once, on the first
 * visit, and kept with a weak ETag (weak: the HTTP server compresses it per Accept-Encoding) and
 * `Cache-Control: no-cache`, so a browser revalidates and gets a 304 without the body.
 */
export function graphiQLPage(
  render: Renderer,
  options: GraphiQLOptions,
): (request: HttpRequest) => Promise<WholeAnswer> {
  let page: Promise<{ html: string; etag: string }> | undefined;
  return async (request) => {
    page ??= render(options).then((rendered) => ({ html: rendered, etag: etag(rendered, { weak: true }) }));
    const { html, etag: tag } = await page;
    const validators = { etag: tag, 'cache-control': 'no-cache' };
    if (fresh({ 'if-none-match': request.headers.get('if-none-match') ?? undefined }, validators))
      return { status: 304, headers: validators, body: null };
    return { status: 200, headers: { 'content-type': 'text/html', ...validators }, body: html };
  };
}
