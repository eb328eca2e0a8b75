import { createGraphQLError } from 'graphql-yoga';
import type { IntakeStep } from '../pipeline/stages.js';

/** GraphQL over HTTP takes GET and POST: any other method is HTTP 405, with the two it takes in `Allow`. */
export const graphqlMethods: IntakeStep = (request) =>
  request.method === 'GET' || request.method === 'POST'
    ? undefined
    : createGraphQLError('GraphQL only supports GET and POST requests.', { extensions: { code: 'BAD_REQUEST', http: { status: 405, headers: { Allow: 'GET, POST' } } } });
