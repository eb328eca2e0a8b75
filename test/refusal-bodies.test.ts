import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * No client-supplied value in a 4xx body (issue 22): every refusal path gets a marker where the
 * client can put one (a header, a parameter's name or value, the body, the URL, a literal), over
 * HTTP as a client sees it, and the marker must not come back. Names of the document itself (a
 * field a query asks for) are GraphQL names the client wrote in its own document and stay in
 * validation messages, which would be useless without them: they are not tried here.
 */

const MARKER = 'zz-marker-7f3a';
let t: TestGateway;
let url: string;
/** The same gateway with CSRF_PREVENTION=true, for its 403. */
let csrfGateway: TestGateway;
let csrfUrl: string;
beforeAll(async () => {
  [t, csrfGateway] = await Promise.all([startTestGateway(), startTestGateway({ env: { CSRF_PREVENTION: 'true' } })]);
  [url, csrfUrl] = await Promise.all([t.listen(), csrfGateway.listen()]);
});
afterAll(() => Promise.all([t.close(), csrfGateway.close()]));

const json = { 'content-type': 'application/json', accept: 'application/graphql-response+json' };
const csrf = { 'x-graphql-csrf': '1', accept: 'application/graphql-response+json' };
const get = (params: Record<string, string>, headers: Record<string, string> = csrf): [string, RequestInit] => [
  `${url}?${new URLSearchParams(params)}`,
  { headers },
];
const post = (body: string, headers: Record<string, string> = json): [string, RequestInit] => [
  url,
  { method: 'POST', headers, body },
];
const query = JSON.stringify({ query: '{ __typename }' });

const cases: [string, number, () => [string, RequestInit]][] = [
  ['415: an unknown Content-Encoding', 415, () => post(query, { ...json, 'content-encoding': MARKER })],
  ['415: an unknown Content-Type', 415, () => post(query, { ...json, 'content-type': `application/${MARKER}` })],
  [
    '406: an Accept naming nothing the gateway answers in',
    406,
    () => post(query, { ...json, accept: `application/${MARKER}` }),
  ],
  [
    '406: an Accept-Encoding refusing every coding',
    406,
    () => post(query, { ...json, 'accept-encoding': `${MARKER}, identity;q=0` }),
  ],
  [
    '405: a method GraphQL does not take',
    405,
    () => [`${url}?${MARKER}=1`, { method: 'PUT', headers: { ...json, 'x-marker': MARKER }, body: MARKER }],
  ],
  [
    '405: a mutation over GET',
    405,
    () =>
      get({
        query: 'mutation($p: String!) { login(input: { username: "demo", password: $p }) { accessToken } }',
        variables: JSON.stringify({ p: MARKER }),
      }),
  ],
  [
    '413: a body over the cap',
    413,
    () => post(JSON.stringify({ query: '{ __typename }', variables: { v: MARKER.repeat(10_000) } })),
  ],
  ['400: a body that is not JSON', 400, () => post(`{"query": "${MARKER}`)],
  ['400: an unknown body parameter', 400, () => post(JSON.stringify({ query: '{ __typename }', [MARKER]: 1 }))],
  [
    '400: variables that are not an object',
    400,
    () => post(JSON.stringify({ query: '{ __typename }', variables: MARKER })),
  ],
  ['400: a GET whose variables are not JSON', 400, () => get({ query: '{ __typename }', variables: MARKER })],
  ['400: a GET whose query does not parse', 400, () => get({ query: `{ "${MARKER}" }` })],
  [
    '400: a literal of the wrong type',
    400,
    () => post(JSON.stringify({ query: `{ heads(first: "${MARKER}") { totalCount } }` })),
  ],
  [
    '400: an operation name not in the document',
    400,
    () => post(JSON.stringify({ query: 'query A { __typename }', operationName: MARKER })),
  ],
  [
    '403: a GET without a CSRF header (CSRF_PREVENTION=true)',
    403,
    () => [
      `${csrfUrl}?${new URLSearchParams({ query: `{ head(id: "${MARKER}") { name } }` })}`,
      { headers: { 'x-marker': MARKER } },
    ],
  ],
  ['404: an unknown path', 404, () => [url.replace('/graphql', `/${MARKER}`), {}]],
];

describe('4xx answers', () => {
  it.each(cases)('%s: no marker in the body', async (_, status, request) => {
    const response = await fetch(...request());
    const body = await response.text();
    expect(response.status).toBe(status);
    expect(body).not.toContain(MARKER);
  });
});
