import { shouldRenderGraphiQL, type Plugin } from 'graphql-yoga';

export interface FrontDoorOptions {
  /** Whether yoga serves GraphiQL (to a browser's GET of the GraphQL endpoint). */
  readonly graphiql: boolean;
  /** The title of the page a browser gets where GraphiQL is off. */
  readonly title: string;
}

/** Where a person looks for GraphiQL; yoga serves it at the GraphQL endpoint itself. */
const GRAPHIQL_PATH = '/graphiql';

/** Parameters that make a GET of the endpoint a GraphQL request, not a page view. */
const graphqlParameters = ['query', 'documentId', 'extensions'];

interface Pages {
  readonly html: string;
  readonly json: string;
}

/** What the front door says, in HTML for a browser and JSON for anything else: constants only, nothing of the request. */
function pages(endpoint: string, options: FrontDoorOptions): Pages {
  const send = `Send GraphQL to ${endpoint}: POST queries and mutations with Content-Type: application/json, or GET queries with their parameters in the URL.`;
  const docs = options.graphiql
    ? `GraphiQL, with the schema's documentation in its Docs pane: ${GRAPHIQL_PATH} in a browser.`
    : "GraphiQL and introspection are off here: the schema and its documentation are schema.graphql and the README in the gateway's source.";
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${options.title}</title></head>
<body>
<h1>${options.title}</h1>
<p>${send}</p>
<p>${docs}</p>
</body>
</html>
`;
  const json = JSON.stringify({ graphql: endpoint, graphiql: options.graphiql ? GRAPHIQL_PATH : null, message: send, docs });
  return { html, json };
}

/**
 * The gateway's front door, for a person who opens it in a browser or with curl (GET only):
 * - `/`: a browser goes to GraphiQL where it is on (302 to the endpoint, where yoga serves it);
 *   otherwise a small page (HTML for a browser, JSON for anything else) says where the endpoint
 *   and the documentation are;
 * - `/graphiql`: 302 to the endpoint where GraphiQL is on; a 404 with that page where it is off;
 * - the endpoint, where GraphiQL is off: a browser's GET without GraphQL parameters gets that page
 *   rather than a refusal it cannot read.
 * "A browser" is yoga's own test for serving GraphiQL: a GET whose Accept names text/html.
 * Every other request goes on to yoga untouched. yoga's own landing page (`landingPage`) answers
 * browsers only, on every unknown path, and names yoga; it stays off.
 */
export function useFrontDoor(options: FrontDoorOptions): Plugin {
  let endpoint = '/graphql';
  let texts = pages(endpoint, options);
  const answer = (Response: typeof globalThis.Response, request: Request, status: number) =>
    shouldRenderGraphiQL(request)
      ? new Response(texts.html, { status, headers: { 'content-type': 'text/html; charset=utf-8', vary: 'Accept' } })
      : new Response(texts.json, { status, headers: { 'content-type': 'application/json; charset=utf-8', vary: 'Accept' } });
  const toGraphiQL = (Response: typeof globalThis.Response) => new Response(null, { status: 302, headers: { location: endpoint, vary: 'Accept' } });
  /** A browser opening the endpoint itself; a GET with a query, documentId or extensions is GraphQL and runs. */
  const opensEndpoint = (request: Request, url: URL) =>
    (url.pathname === endpoint || url.pathname === `${endpoint}/`) && shouldRenderGraphiQL(request) && !graphqlParameters.some((name) => url.searchParams.has(name));
  return {
    onYogaInit({ yoga }) {
      endpoint = yoga.graphqlEndpoint;
      texts = pages(endpoint, options);
    },
    onRequest({ request, url, endResponse, fetchAPI }) {
      if (request.method !== 'GET') return;
      if (url.pathname === '/') {
        endResponse(options.graphiql && shouldRenderGraphiQL(request) ? toGraphiQL(fetchAPI.Response) : answer(fetchAPI.Response, request, 200));
      } else if (url.pathname === GRAPHIQL_PATH) {
        endResponse(options.graphiql ? toGraphiQL(fetchAPI.Response) : answer(fetchAPI.Response, request, 404));
      } else if (!options.graphiql && opensEndpoint(request, url)) {
        endResponse(answer(fetchAPI.Response, request, 200));
      }
    },
  };
}
