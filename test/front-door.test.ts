import { readFileSync } from 'node:fs';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { withoutErrorStacks } from '../src/server/pages/graphiql-page.js';
import { answer, type GraphQLResponse, startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The front door (src/server/pages/front-door.ts), as a person meets it with a browser or curl: where
 * GraphiQL is on (development) `/` and `/graphiql` lead to it; where it is off (production) `/`,
 * `/graphiql` and a browser's GET of `/graphql` answer a small page saying where things are.
 * GraphiQL itself in Chromium: graphiql.browser.test.ts.
 */

/** What Chromium sends for a navigation. */
const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8';
const MARKER = 'zz-marker-5d1c';
const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

const open = (on: TestGateway, path: string, accept?: string) =>
  on.gateway.fetch(`http://gateway${path}`, { redirect: 'manual', headers: accept === undefined ? {} : { accept } });

/** Nothing an attacker can use: no product or version, no stack, nothing of the request. */
function expectNothingToUse(text: string): void {
  expect(text).not.toMatch(/yoga|envelop|node\.?js|graphql-js|\bat .*:\d+:\d+/i);
  expect(text).not.toContain(version);
  expect(text).not.toContain(MARKER);
}

describe('GraphiQL on (the default outside production)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  it('/ sends a browser to GraphiQL, at the GraphQL endpoint', async () => {
    const response = await open(t, '/', BROWSER);
    expect(response.status).toBe(302);
    expect(response.headers.get('location')).toBe('/graphql');
    expect(response.headers.get('vary')).toMatch(/accept/i);
  });

  it('/ tells anything else, in JSON, where the endpoint and GraphiQL (with the docs) are', async () => {
    for (const accept of [undefined, 'application/json', '*/*']) {
      const response = await open(t, '/', accept);
      expect(response.status, accept).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      const body = (await response.json()) as Record<string, unknown>;
      expect(body).toMatchObject({ graphql: '/graphql', graphiql: '/graphiql' });
      expect(body.docs).toContain('/graphiql');
    }
  });

  it('/graphiql leads to GraphiQL, which a browser gets at /graphql', async () => {
    const response = await open(t, `/graphiql?${MARKER}=1`, BROWSER);
    expect(response.status).toBe(302);
    expect(response.headers.get('location')).toBe('/graphql');
    const page = await open(t, '/graphql', BROWSER);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toContain('<title>Avatar Head gateway</title>');
    expect(t.calls()).toEqual([]);
  });

  it('leaves GraphQL requests to the pipeline and unknown paths to the 404 route: a GET query runs, /nope is 404', async () => {
    const query = await answer(
      await open(t, `/graphql?query=${encodeURIComponent('{ __typename }')}`, 'application/json'),
    );
    expect(query).toMatchObject({ status: 200, body: { data: { __typename: 'Query' } } });
    expect((await open(t, '/nope', BROWSER)).status).toBe(404);
    expect((await t.gateway.fetch('http://gateway/', { method: 'POST', headers: { accept: BROWSER } })).status).toBe(
      404,
    );
  });
});

describe('GraphiQL off (NODE_ENV=production)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ env: { NODE_ENV: 'production' } });
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  it('/ answers a browser a small page saying where the endpoint and the docs are, and that GraphiQL is off', async () => {
    const response = await open(t, `/?${MARKER}=1`, BROWSER);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await response.text();
    expect(html).toContain('<title>Avatar Head gateway</title>');
    expect(html).toContain('Send GraphQL to /graphql: POST queries and mutations with Content-Type: application/json');
    expect(html).toContain('GraphiQL and introspection are off here');
    expect(html).toContain('schema.graphql');
    expectNothingToUse(html);
  });

  it('/ answers JSON to anything else, with no GraphiQL address', async () => {
    const response = await open(t, '/', 'application/json');
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(JSON.parse(text)).toMatchObject({
      graphql: '/graphql',
      graphiql: null,
      docs: expect.stringContaining('schema.graphql'),
    });
    expectNothingToUse(text);
  });

  it('/graphiql is 404 with the same page: GraphiQL is off', async () => {
    const html = await open(t, `/graphiql?${MARKER}=1`, BROWSER);
    expect(html.status).toBe(404);
    expect(await html.text()).toContain('GraphiQL and introspection are off here');
    const json = await open(t, '/graphiql');
    expect(json.status).toBe(404);
    expect(await json.json()).toMatchObject({ graphiql: null });
  });

  it('a browser opening /graphql gets that page (not an empty 406); clients and GET queries get what they got', async () => {
    const page = await open(t, '/graphql', BROWSER);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('Send GraphQL to /graphql');
    expectNothingToUse(html);
    // Only text/html: still a page, where the answer types alone would have refused it.
    expect((await open(t, '/graphql', 'text/html')).status).toBe(200);
    expect((await open(t, '/graphql/', BROWSER)).status).toBe(200);
    // A GraphQL client without a query gets GraphQL's own refusal.
    const noQuery = await answer(await open(t, '/graphql', 'application/graphql-response+json'));
    expect(noQuery.status).toBe(400);
    expect(noQuery.body.errors?.[0]?.extensions?.code).toBe('BAD_REQUEST');
    // A GET query a browser opens runs.
    const query = await answer(
      await open(t, `/graphql?query=${encodeURIComponent('{ heads(first: 1) { totalCount } }')}`, BROWSER),
    );
    expect(query.status).toBe(200);
    expect(query.body).toEqual({ data: { heads: { totalCount: t.reference.store.headCount } } });
    expect(t.calls()).toHaveLength(1);
  });
});

describe('no stacks in error answers', () => {
  it('NODE_ENV=development (where a server often adds one to a masked error): syntax, validation and upstream errors carry their code and message only', async () => {
    const t = await startTestGateway({ env: { NODE_ENV: 'development' } });
    try {
      const ids = t.reference.store.headIds();
      t.reference.injectFault('getHeadExt', { kind: 'status', status: 500, body: { detail: MARKER } });
      for (const [query, code] of [
        ['{ heads(first: 1) { totalCount } } !!', 'GRAPHQL_PARSE_FAILED'],
        ['{ nope }', 'GRAPHQL_VALIDATION_FAILED'],
        [`{ head(id: "${ids[0]}") { updatedAt } }`, 'UPSTREAM_ERROR'],
      ] as const) {
        const got = await answer<GraphQLResponse>(
          await t.gateway.fetch('http://gateway/graphql', {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ query }),
          }),
        );
        expect(
          got.body.errors?.map((e) => e.extensions?.code),
          query,
        ).toEqual([code]);
        const text = JSON.stringify(got.body);
        expect(text).not.toMatch(/stack|originalError/);
        expectNothingToUse(text);
      }
    } finally {
      await t.close();
    }
  });

  it("GraphiQL's page formats an error the browser throws (a syntax error) without its stack", () => {
    const page = renderGraphiQL({ title: 'x' });
    const [formatter, error] = /\{message:(\w+)\.message,stack:\1\.stack\}/.exec(page)!;
    const patched = withoutErrorStacks(page);
    expect(patched).not.toMatch(/stack:\w+\.stack/);
    expect(patched).toBe(page.replace(formatter, `{message:${error}.message}`));
    // A render-graphiql whose formatter changed fails here, not silently in a browser.
    expect(() => withoutErrorStacks('<html></html>')).toThrow(/expected one error formatter adding a stack, found 0/);
  });
});
