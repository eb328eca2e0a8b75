import etag from 'etag';
import fresh from 'fresh';
import type { GraphiQLOptions, Plugin } from 'graphql-yoga';

type Renderer = (options: GraphiQLOptions) => Promise<string>;

/**
 * The GraphiQL page inlines every asset (some 9 MB of HTML) and is the same for the life of the
 * gateway: it is rendered once, and served with a weak ETag (weak: the HTTP server compresses it
 * per Accept-Encoding) and `Cache-Control: no-cache`, so a browser revalidates and gets a 304
 * without the body. `renderGraphiQL` goes to yoga's option of that name, `plugin` to its plugins.
 */
export function useGraphiQLCache(render: Renderer): { renderGraphiQL: Renderer; plugin: Plugin } {
  let page: Promise<{ html: string; etag: string }> | undefined;
  const rendered = (options: GraphiQLOptions) => (page ??= render(options).then((html) => ({ html, etag: etag(html, { weak: true }) })));
  return {
    renderGraphiQL: async (options) => (await rendered(options)).html,
    plugin: {
      onResponse({ request, response, setResponse, fetchAPI }) {
        // Cheap for every other response: no page rendered yet (never, with GraphiQL off), or not a GET for HTML.
        if (page === undefined || request.method !== 'GET' || !(response.headers.get('content-type') ?? '').startsWith('text/html')) return;
        return page.then(({ etag: tag }) => {
          const validators = { etag: tag, 'cache-control': 'no-cache' };
          if (fresh({ 'if-none-match': request.headers.get('if-none-match') ?? undefined }, validators)) {
            setResponse(new fetchAPI.Response(null, { status: 304, headers: validators }));
            return;
          }
          for (const [name, value] of Object.entries(validators)) response.headers.set(name, value);
        });
      },
    },
  };
}
