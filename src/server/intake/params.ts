import { GraphQLError } from 'graphql';
import { createGraphQLError, type Plugin } from 'graphql-yoga';

const notJson = (what: string) => createGraphQLError(`${what} is not valid JSON.`, { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } });

/** Which URL parameter of a GET did not parse (yoga's GET parser only throws JSON.parse's SyntaxError). */
function badUrlParameter(request: Request): string {
  const parameters = new URL(request.url).searchParams;
  for (const name of ['variables', 'extensions']) {
    const value = parameters.get(name);
    if (value === null || value === '') continue;
    try {
      JSON.parse(value);
    } catch {
      return `The "${name}" URL parameter`;
    }
  }
  return 'A request parameter';
}

/**
 * Malformed request parameters are the client's mistake, answered HTTP 400 with code BAD_REQUEST
 * and without a word of what was sent: yoga's JSON body parser echoes the body in
 * `extensions.originalError` (JSON.parse quotes it), and its GET parser lets JSON.parse's
 * SyntaxError out for malformed `variables`/`extensions`, which became INTERNAL_SERVER_ERROR.
 * Coded errors of the parser (the body cap's 413, yoga's own 400s) pass as they are.
 */
export function useStrictRequestParams(): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser }) {
      if (requestParser === undefined) return;
      setRequestParser(async (incoming) => {
        try {
          return await requestParser(incoming);
        } catch (error) {
          if (error instanceof GraphQLError && error.extensions.originalError === undefined) throw error;
          if (error instanceof GraphQLError || (error instanceof SyntaxError && request.method === 'POST')) throw notJson('The request body');
          if (error instanceof SyntaxError) throw notJson(badUrlParameter(request));
          throw error;
        }
      });
    },
  };
}
