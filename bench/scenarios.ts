/**
 * What `npm run bench` measures. `direct` is the baseline: the REST call a client would make
 * without the gateway. Every other scenario is a GraphQL operation posted to the gateway.
 */

/** Filled in at start-up: a head id from the upstream listing and a demo bearer token. */
export interface Fixtures {
  readonly headId: string;
  readonly token: string;
}

export interface HttpRequest {
  readonly target: 'upstream' | 'gateway';
  readonly method: 'GET' | 'POST';
  /** Relative to the upstream base URL (ending in /v2); ignored for the gateway (its /graphql URL). */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
}

export interface Scenario {
  readonly name: string;
  readonly description: string;
  request(fixtures: Fixtures): HttpRequest;
}

const graphql = (query: string, variables?: Record<string, unknown>, token?: string) => (): HttpRequest => ({
  target: 'gateway',
  method: 'POST',
  path: '',
  headers: { 'content-type': 'application/json', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }) },
  body: JSON.stringify(variables === undefined ? { query } : { query, variables }),
});

export const scenarios: readonly Scenario[] = [
  {
    name: 'direct',
    description: 'GET /v2/heads/{id}/ext on the upstream, no gateway (baseline)',
    request: ({ headId }) => ({ target: 'upstream', method: 'GET', path: `/heads/${headId}/ext`, headers: {} }),
  },
  {
    name: 'Q1',
    description: 'head(id) with hair',
    request: ({ headId }) =>
      graphql('query Q1($id: ID!) { head(id: $id) { name url createdAt hair { name url } } }', { id: headId })(),
  },
  {
    name: 'Q2',
    description: 'heads(first: 50) with hair names',
    request: graphql('query Q2 { heads(first: 50) { nodes { name hair { name } } } }'),
  },
  {
    name: 'Q3',
    description: 'heads(first: 20) with headMetadata (not in the plain listing)',
    request: graphql('query Q3 { heads(first: 20) { nodes { headMetadata } } }'),
  },
  {
    name: 'Q4',
    description: 'head(id) with headMetadata and hair { hairMetadata userId gender } (both hair variants)',
    request: ({ headId }) =>
      graphql('query Q4($id: ID!) { head(id: $id) { headMetadata hair { hairMetadata userId gender } } }', {
        id: headId,
      })(),
  },
  {
    name: 'Q5',
    description: 'permissions(first: 100) with a bearer token',
    request: ({ token }) =>
      graphql('query Q5 { permissions(first: 100) { totalCount nodes { role } } }', undefined, token)(),
  },
];
