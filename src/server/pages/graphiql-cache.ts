import etag from 'etag';
import fresh from 'fresh';
import type { GraphiQLOptions, Plugin } from 'graphql-yoga';

type Renderer = (options: GraphiQLOptions) => Promise<string>;

/** The GraphiQL page, rendered once: `render` is yoga's `renderGraphiQL` option, `rendered` what useGraphiQLCache validates against. */
export interface GraphiQLPage {
  readonly render: Renderer;
  /** The page and its ETag once it was first asked for; undefined before. */
  rendered(): Promise<{ readonly html: string; readonly etag: string }> | undefined;
}

/**
 * The GraphiQL page inlines every asset (some 9 MB of HTML) and is the same for the life of the
 * gateway: it is rendered once, on the first visit, and kept with a weak ETag (weak: the HTTP
 * server compresses it per Accept-Encoding).
 */
export function graphiQLPage(render: Renderer): GraphiQLPage {
  let page: Promise<{ html: string; etag: string }> | undefined;
  return {
    render: async (options) => (await (page ??= render(options).then((html) => ({ html, etag: etag(html, { weak: true }) })))).html,
    rendered: () => page,
  };
}

/**
 * Serves `page` with its ETag and `Cache-Control: no-cache`, so a browser revalidates and gets a
 * 304 without the body.
 */
export function useGraphiQLCache(page: GraphiQLPage): Plugin {
  return {
    onResponse({ request, response, setResponse, fetchAPI }) {
      const rendered = page.rendered();
      // Cheap for every other response: no page rendered yet (never, with GraphiQL off), or not a GET for HTML.
      if (rendered === undefined || request.method !== 'GET' || !(response.headers.get('content-type') ?? '').startsWith('text/html')) return;
      return rendered.then(({ etag: tag }) => {
        const validators = { etag: tag, 'cache-control': 'no-cache' };
        if (fresh({ 'if-none-match': request.headers.get('if-none-match') ?? undefined }, validators)) {
          setResponse(new fetchAPI.Response(null, { status: 304, headers: validators }));
          return;
        }
        for (const [name, value] of Object.entries(validators)) response.headers.set(name, value);
      });
    },
  };
}
