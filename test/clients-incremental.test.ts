import { ApolloClient, gql, HttpLink, InMemoryCache, type TypedDocumentNode } from '@apollo/client';
import { Defer20220824Handler, GraphQL17Alpha9Handler } from '@apollo/client/incremental';
import { Client, cacheExchange, fetchExchange } from '@urql/core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway, upstreamHead } from './support/gateway.js';

/*
 * @defer and @stream as the client libraries ask for them, on their defaults, against the gateway
 * on a loopback port: Apollo Client 4 with each of its incremental handlers (the 2022-08-24 format
 * and graphql-js 17.0.0-alpha.9's), and urql.
 */

let t: TestGateway;
let url: string;
let ids: string[];

beforeAll(async () => {
  t = await startTestGateway();
  url = await t.listen();
  ids = t.reference.store.headIds();
});
afterAll(() => t.close());
beforeEach(() => t.reset());

/** A `fetch` that records the Accept header of every request a client sends. */
function acceptRecorder(): { fetch: typeof fetch; accepts: string[] } {
  const accepts: string[] = [];
  return {
    accepts,
    fetch: (input, init) => {
      accepts.push(new Headers(init?.headers).get('accept') ?? '');
      return fetch(input, init);
    },
  };
}

type Head = { __typename: 'Head'; id: string; name: string; headMetadata?: unknown };
const DEFERRED: TypedDocumentNode<{ head: Head | null }, { id: string }> = gql`
  query DeferredHead($id: ID!) {
    head(id: $id) {
      id
      name
      ... @defer {
        headMetadata
      }
    }
  }
`;
const STREAMED: TypedDocumentNode<
  { nodes: ({ __typename: 'Head'; id: string; name: string } | null)[] },
  { ids: string[] }
> = gql`
  query StreamedHeads($ids: [ID!]!) {
    nodes(ids: $ids) @stream(initialCount: 1) {
      id
      ... on Head {
        name
      }
    }
  }
`;

const globalId = (uuid: string) => Buffer.from(`Head:${uuid}`).toString('base64');

/** Every state an Apollo watchQuery goes through until it is done loading (its last part came). */
function statesUntilLoaded<T>(
  client: ApolloClient,
  query: TypedDocumentNode<T, any>,
  variables: Record<string, unknown>,
): Promise<{ dataState: string; loading: boolean; data: T | undefined }[]> {
  return new Promise((resolve, reject) => {
    const states: { dataState: string; loading: boolean; data: T | undefined }[] = [];
    const subscription = client.watchQuery({ query, variables }).subscribe({
      next: (result) => {
        states.push({ dataState: result.dataState, loading: result.loading, data: result.data as T | undefined });
        if (result.error) reject(result.error);
        if (!result.loading) {
          subscription.unsubscribe();
          resolve(states);
        }
      },
      error: reject,
    });
  });
}

describe.each([
  ['Defer20220824Handler', () => new Defer20220824Handler(), 'deferSpec=20220824'],
  ['GraphQL17Alpha9Handler', () => new GraphQL17Alpha9Handler(), 'incrementalSpec=v0.2'],
])('Apollo Client 4 with %s', (_name, handler, spec) => {
  const client = (recorder: ReturnType<typeof acceptRecorder>) =>
    new ApolloClient({
      cache: new InMemoryCache(),
      link: new HttpLink({ uri: url, fetch: recorder.fetch }),
      incrementalHandler: handler(),
    });

  it('@defer: the head first, its deferred metadata after, one read each', async () => {
    const recorder = acceptRecorder();
    const id = ids[0]!;
    // Holds the deferred read, so the first part surely comes alone.
    t.reference.injectFault('getHeadExtById', { kind: 'latency', ms: 150 });
    const states = await statesUntilLoaded(client(recorder), DEFERRED, { id: globalId(id) });
    const streaming = states.find((state) => state.dataState === 'streaming');
    expect(streaming?.data?.head).toEqual({ __typename: 'Head', id: globalId(id), name: upstreamHead(t, id).name });
    expect(states.at(-1)).toMatchObject({
      dataState: 'complete',
      data: {
        head: {
          __typename: 'Head',
          id: globalId(id),
          name: upstreamHead(t, id).name,
          headMetadata: upstreamHead(t, id).head_metadata,
        },
      },
    });
    expect(recorder.accepts).toEqual([expect.stringContaining(`multipart/mixed;${spec}`)]);
    expect(
      t
        .calls()
        .map((call) => call.operation)
        .sort(),
    ).toEqual(['getHeadById', 'getHeadExtById']);
  });

  it('@stream: the first head, then the others', async () => {
    const recorder = acceptRecorder();
    const uuids = ids.slice(0, 3);
    const states = await statesUntilLoaded(client(recorder), STREAMED, { ids: uuids.map(globalId) });
    const heads = uuids.map((uuid) => ({ __typename: 'Head', id: globalId(uuid), name: upstreamHead(t, uuid).name }));
    // While the stream runs: the first head alone.
    expect(states.find((state) => state.loading && state.data !== undefined)?.data?.nodes).toEqual(heads.slice(0, 1));
    expect(states.at(-1)).toMatchObject({ dataState: 'complete', loading: false, data: { nodes: heads } });
    expect(t.calls()).toHaveLength(3);
  });
});

describe('urql on its defaults', () => {
  it('@defer: the first result without the deferred fields, the last with them', async () => {
    const id = ids[1]!;
    t.reference.injectFault('getHeadExtById', { kind: 'latency', ms: 150 });
    const client = new Client({ url, exchanges: [cacheExchange, fetchExchange] });
    const results: { data?: { head: Head | null }; hasNext: boolean }[] = [];
    // Left to end by itself: unsubscribing would abort the request's stream under urql.
    await new Promise<void>((resolve, reject) => {
      client.query(DEFERRED, { id: globalId(id) }).subscribe((result) => {
        if (result.error) reject(result.error);
        results.push({ data: result.data, hasNext: result.hasNext });
        if (!result.hasNext) resolve();
      });
    });
    expect(results[0]).toEqual({
      data: { head: { __typename: 'Head', id: globalId(id), name: upstreamHead(t, id).name } },
      hasNext: true,
    });
    expect(results.at(-1)).toEqual({
      data: {
        head: {
          __typename: 'Head',
          id: globalId(id),
          name: upstreamHead(t, id).name,
          headMetadata: upstreamHead(t, id).head_metadata,
        },
      },
      hasNext: false,
    });
  });
});
