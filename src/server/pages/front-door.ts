import type { WholeAnswer } from '../incoming.js';
import type { HttpRequest } from '../request-state.js';

export interface FrontDoorOptions {
  /** Whether GraphiQL is served (to a browser's GET of the GraphQL endpoint). */
  readonly graphiql: boolean;
  /** The title of the page a browser gets where GraphiQL is off. */
  readonly title: string;
  readonly endpoint: string;
}

/** Where a person looks for GraphiQL; it is served at the GraphQL endpoint itself. */
const GRAPHIQL_PATH = '/graphiql';

/** Parameters that make a browser's GET of the endpoint a GraphQL request that runs, not a page view. */
const graphqlParameters = ['query', 'documentId', 'extensions'];

/** What the front door says, in HTML for a browser and JSON for anything else: nothing of the request. */
function pages({ endpoint, graphiql, title }: FrontDoorOptions): { readonly html: string; readonly json: string } {
  const send = `Send GraphQL to ${endpoint}: POST queries and mutations with Content-Type: application/json, or GET queries with their parameters in the URL.`;
  const docs = graphiql
    ? `GraphiQL, with the schema's documentation in its Docs pane: ${GRAPHIQL_PATH} in a browser.`
    : "GraphiQL and introspection are off here: the schema and its documentation are schema.graphql and the README in the gateway's source.";
  const html = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title></head>
<body>
<h1>${title}</h1>
<p>${send}</p>
<p>${docs}</p>
</body>
</html>
`;
  const json = JSON.stringify({ graphql: endpoint, graphiql: graphiql ? GRAPHIQL_PATH : null, message: send, docs });
  return { html, json };
}

/** A browser's GET gets a page rather than a GraphQL answer: its Accept names text/html (yoga's test for GraphiQL). */
export const isBrowserPageView = (request: HttpRequest): boolean =>
  request.http.method === 'GET' && (request.headers.get('accept')?.includes('text/html') ?? false);

/** For a person with a browser or curl: where GraphiQL is, or a page rather than a refusal they cannot read. */
export function frontDoor(options: FrontDoorOptions): (request: HttpRequest, path: string) => WholeAnswer | undefined {
  const { endpoint } = options;
  const texts = pages(options);
  const answer = (request: HttpRequest, status: number): WholeAnswer =>
    isBrowserPageView(request)
      ? { status, headers: { 'content-type': 'text/html; charset=utf-8', vary: 'Accept' }, body: texts.html }
      : { status, headers: { 'content-type': 'application/json; charset=utf-8', vary: 'Accept' }, body: texts.json };
  const toGraphiQL: WholeAnswer = { status: 302, headers: { location: endpoint, vary: 'Accept' }, body: null };
  const opensEndpoint = (request: HttpRequest, path: string) => {
    if ((path !== endpoint && path !== `${endpoint}/`) || !isBrowserPageView(request)) return false;
    const { target } = request.http;
    const query = new URLSearchParams(target.slice(target.indexOf('?') + 1 || target.length));
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
