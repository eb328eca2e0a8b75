import { ApolloClient, CombinedGraphQLErrors, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * Client awareness (issue 23): /metrics counts operations, their outcomes and durations by the
 * client app that sent them, as it names itself in `apollographql-client-name`/`-version` (what
 * Apollo Client's `clientAwareness` option sends) or `graphql-client-name`/`-version`, bounded
 * and checked. The spans' attributes are in test/tracing.test.ts.
 */

const series = 'gateway_client_operation_duration_seconds';

/** Every `_count` of the client histogram, as `name version outcome` → count. */
async function clientCounts(t: TestGateway): Promise<Record<string, number>> {
  const text = await (await t.gateway.fetch('http://gateway/metrics')).text();
  const counts: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${series}_count{`)) continue;
    const labels = Object.fromEntries(
      [...line.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, key, value]) => [key!, value!]),
    );
    counts[`${labels.client_name} ${labels.client_version} ${labels.outcome}`] = Number(
      line.slice(line.lastIndexOf(' ') + 1),
    );
  }
  return counts;
}

const named = (name: string, version?: string, family = 'apollographql') => ({
  [`${family}-client-name`]: name,
  ...(version === undefined ? {} : { [`${family}-client-version`]: version }),
});

describe('client awareness on the defaults (METRICS_CLIENT_NAMES=50, METRICS_CLIENT_VERSIONS=10)', () => {
  let t: TestGateway;
  let url: string;
  let ids: string[];
  beforeAll(async () => {
    t = await startTestGateway();
    url = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());

  it('counts Apollo Client 4 operations by its clientAwareness name and version, each outcome apart', async () => {
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: new HttpLink({ uri: url }),
      clientAwareness: { name: 'head-viewer-web', version: '4.2.0' },
    });
    const head = await client.query({
      query: gql`query Head($id: ID!) { head(id: $id) { id name } }`,
      variables: { id: ids[0]! },
    });
    expect(head.data).toMatchObject({ head: { name: expect.any(String) } });
    const bad = await client.query({ query: gql`query Bad { head(id: "not-an-id") { id } }`, errorPolicy: 'all' });
    expect(CombinedGraphQLErrors.is(bad.error) && bad.error.errors[0]!.extensions!.code).toBe('BAD_USER_INPUT');
    expect(await clientCounts(t)).toMatchObject({ 'head-viewer-web 4.2.0 ok': 1, 'head-viewer-web 4.2.0 error': 1 });
    // The latency buckets are there for it too.
    const text = await (await t.gateway.fetch('http://gateway/metrics')).text();
    expect(text).toContain(
      `${series}_bucket{le="+Inf",client_name="head-viewer-web",client_version="4.2.0",outcome="ok"} 1`,
    );
  });

  it('reads graphql-client-name/-version too; a request that names no client is `unknown`; each operation of a batch counts', async () => {
    await post(t, { query: '{ __typename }' }, named('hive-cli', '0.9.1', 'graphql'));
    await post(t, [{ query: '{ __typename }' }, { query: '{ __typename }' }], named('batcher', '1'));
    const before = (await clientCounts(t))['unknown unknown ok'] ?? 0;
    await post(t, { query: '{ __typename }' });
    const counts = await clientCounts(t);
    expect(counts).toMatchObject({ 'hive-cli 0.9.1 ok': 1, 'batcher 1 ok': 2 });
    expect(counts['unknown unknown ok']).toBe(before + 1);
  });

  it('cuts a long name to 64 characters and refuses one with other characters (`invalid`), over HTTP; neither appears in /metrics', async () => {
    const send = async (headers: Record<string, string>) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ query: '{ __typename }' }),
      });
      expect(response.status).toBe(200);
      await response.text();
    };
    const long = `long-${'x'.repeat(500)}`;
    await send(named(long, `1.0.0-${'9'.repeat(200)}`));
    for (const hostile of ['evil"} 1\tfake_metric{x="', 'épée', 'a,b', '<script>']) await send(named(hostile, '1'));
    await send(named('fine-name', 'bad version "quoted"'));
    const counts = await clientCounts(t);
    expect(counts[`${long.slice(0, 64)} ${`1.0.0-${'9'.repeat(200)}`.slice(0, 64)} ok`]).toBe(1);
    expect(counts['invalid 1 ok']).toBe(4);
    expect(counts['fine-name invalid ok']).toBe(1);
    const text = await (await t.gateway.fetch('http://gateway/metrics')).text();
    for (const leak of ['evil', 'fake_metric', '<script', 'quoted', 'x'.repeat(65)]) expect(text).not.toContain(leak);
  });
});

describe('METRICS_CLIENT_NAMES=2, METRICS_CLIENT_VERSIONS=2', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ env: { METRICS_CLIENT_NAMES: '2', METRICS_CLIENT_VERSIONS: '2' } });
  });
  afterAll(() => t.close());

  it('keeps the first two names and the first two versions of each apart: the rest are `other`, so clients cannot grow the series', async () => {
    const sent: [string, string][] = [
      ['web', '1'],
      ['ios', '7'],
      ['android', '3'],
      ['web', '2'],
      ['web', '3'],
      ['web', '1'],
      ['tv', '1'],
      ['ios', '8'],
      ['ios', '9'],
    ];
    for (const [name, version] of sent) await post(t, { query: '{ __typename }' }, named(name, version));
    // Requests without a name, or with a refused one, take no name's place.
    await post(t, { query: '{ __typename }' });
    await post(t, { query: '{ __typename }' }, named('bad\tname', '1'));
    expect(await clientCounts(t)).toEqual({
      'web 1 ok': 2,
      'web 2 ok': 1,
      'web other ok': 1,
      'ios 7 ok': 1,
      'ios 8 ok': 1,
      'ios other ok': 1,
      // `other` keeps the versions of the names it holds within the same bound.
      'other 3 ok': 1,
      'other 1 ok': 1,
      'unknown unknown ok': 1,
      'invalid 1 ok': 1,
    });
  });
});

describe('METRICS_KNOWN_CLIENTS=web-app with METRICS_CLIENT_NAMES=2', () => {
  it('keeps the listed app apart after made-up names took every other label (the attack: 60 names first)', async () => {
    const t = await startTestGateway({ env: { METRICS_CLIENT_NAMES: '2', METRICS_KNOWN_CLIENTS: 'web-app' } });
    try {
      for (let i = 0; i < 60; i++) await post(t, { query: '{ __typename }' }, named(`made-up-${i}`, '1'));
      await post(t, { query: '{ __typename }' }, named('web-app', '4.2.0'));
      const counts = await clientCounts(t);
      expect(counts).toMatchObject({
        'made-up-0 1 ok': 1,
        'made-up-1 1 ok': 1,
        'other 1 ok': 58,
        'web-app 4.2.0 ok': 1,
      });
      expect(Object.keys(counts)).toHaveLength(4);
    } finally {
      await t.close();
    }
  });
});
