import { createGraphQLError } from 'graphql-yoga';
import type { Policy } from '../pipeline/stages.js';

/** GraphQL over HTTP takes GET and POST: any other method is HTTP 405, with the two it takes in `Allow`. */
export const graphqlMethods: Policy = {
  name: 'method',
  intake: (request) =>
    request.http.method === 'GET' || request.http.method === 'POST'
      ? undefined
      : createGraphQLError('GraphQL only supports GET and POST requests.', {
          extensions: { code: 'BAD_REQUEST', http: { status: 405, headers: { Allow: 'GET, POST' } } },
        }),
};
