import type { WholeAnswer } from '../incoming.js';
import type { HttpRequest } from '../request-state.js';

export interface FrontDoorOptions {
  /** Whether GraphiQL is served (to a browser's GET of the GraphQL endpoint). */
  readonly graphiql: boolean;
  /** The title of the page a browser gets where GraphiQL is off. */
  readonly title: string;
  /** The GraphQL endpoint's path. */
  readonly endpoint: string;
}

/** Where a person looks for GraphiQL; it is served at the GraphQL endpoint itself. */
const GRAPHIQL_PATH = '/graphiql';

/** Parameters that make a GET of the endpoint a GraphQL request, not a page view. */
const graphqlParameters = ['query', 'documentId', 'extensions'];

interface Pages {
  readonly html: string;
  readonly json: string;
}

/**
 * What the front door says, in HTML for a browser and JSON for anything else: constants only, nothing of the request.
 */
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
  const json = JSON.stringify({
    graphql: endpoint,
    graphiql: options.graphiql ? GRAPHIQL_PATH : null,
    message: send,
    docs,
  });
  return { html, json };
}

/**
 * A browser's GET, which gets a page rather than a GraphQL answer: one whose Accept names text/html (yoga's test for
 * serving GraphiQL).
 */
export const isBrowserPageView = (request: HttpRequest): boolean =>
  request.http.method === 'GET' && (request.headers.get('accept')?.includes('text/html') ?? false);

/**
 * The gateway's front door, for a person who opens it in a browser or with curl (GET only):
 * - `/`: a browser goes to GraphiQL where it is on (302 to the endpoint, where GraphiQL is served);
 *   otherwise a small page (HTML for a browser, JSON for anything else) says where the endpoint
 *   and the documentation are;
 * - `/graphiql`: 302 to the endpoint where GraphiQL is on; a 404 with that page where it is off;
 * - the endpoint, where GraphiQL is off: a browser's GET without GraphQL parameters gets that page
 *   rather than a refusal it cannot read.
 * Every other request goes on (undefined).
 */
export function frontDoor(options: FrontDoorOptions): (request: HttpRequest, path: string) => WholeAnswer | undefined {
  const { endpoint } = options;
  const texts = pages(endpoint, options);
  const answer = (request: HttpRequest, status: number): WholeAnswer =>
    isBrowserPageView(request)
      ? { status, headers: { 'content-type': 'text/html; charset=utf-8', vary: 'Accept' }, body: texts.html }
      : { status, headers: { 'content-type': 'application/json; charset=utf-8', vary: 'Accept' }, body: texts.json };
  const toGraphiQL: WholeAnswer = { status: 302, headers: { location: endpoint, vary: 'Accept' }, body: null };
  /** A browser opening the endpoint itself; a GET with a query, documentId or extensions is GraphQL and runs. */
  const opensEndpoint = (request: HttpRequest, path: string) => {
    if ((path !== endpoint && path !== `${endpoint}/`) || !isBrowserPageView(request)) return false;
    const query = new URLSearchParams(
      request.http.target.slice(request.http.target.indexOf('?') + 1 || request.http.target.length),
    );
    return !graphqlParameters.some((name) => query.has(name));
  };
  return (request, path) => {
    if (request.http.method !== 'GET') return undefined;
    if (path === '/') return options.graphiql && isBrowserPageView(request) ? toGraphiQL : answer(request, 200);
    if (path === GRAPHIQL_PATH) return options.graphiql ? toGraphiQL : answer(request, 404);
    if (!options.graphiql && opensEndpoint(request, path)) return answer(request, 200);
    return undefined;
  };
}
