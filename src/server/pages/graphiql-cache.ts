import etag from 'etag';
import fresh from 'fresh';
import type { GraphiQLOptions } from 'graphql-yoga';
import type { WholeAnswer } from '../incoming.js';
import type { HttpRequest } from '../request-state.js';

/** The page (9 MB) never changes: rendered once, kept with a weak ETag (compressed per Accept-Encoding), for 304s. */
export function graphiQLPage(
  render: (options: GraphiQLOptions) => Promise<string>,
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
