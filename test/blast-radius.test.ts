import { afterEach, describe, expect, it } from 'vitest';
import { type OperationName, operationNames } from '../src/domain/operations.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type GraphQLResponse, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';

/*
 * Issue 33, point 1: one breaker per upstream operation. A route that fails opens its own breaker
 * only; the other operations go on being served, /ready stays 200, and the refused calls say which
 * operation and when to retry. Against the reference upstream answering 503 for one route, through
 * the gateway served on a loopback port (real HTTP), each test on a gateway of its own.
 */

let current: TestGateway | undefined;
afterEach(async () => {
  await current?.close();
  current = undefined;
});

/** The gateway on a loopback port, and a POST to its /graphql: the status, the headers and the body. */
async function serve(env: Record<string, string> = {}) {
  current = await startTestGateway({ env });
  const t = current;
  const url = await t.listen();
  const post = async (query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
      body: JSON.stringify({ query, variables }),
    });
    return { status: response.status, headers: response.headers, text: await response.text() };
  };
  const graphql = async (query: string, variables?: Record<string, unknown>, headers?: Record<string, string>) =>
    JSON.parse((await post(query, variables, headers)).text) as GraphQLResponse;
  const ready = async () => {
    const response = await fetch(new URL('/ready', url));
    return { status: response.status, body: (await response.json()) as unknown };
  };
  return { t, post, graphql, ready };
}

const metric = async (t: TestGateway, series: string) => sampleOf(await t.metrics.registry.metrics(), series);
const codes = (response: GraphQLResponse) => (response.errors ?? []).map((e) => e.extensions?.code);
const metadataQuery = `{ heads(first: 20) { nodes { headMetadata } } }`;
const headQuery = `query($id: ID!) { head(id: $id) { uuid name } }`;

describe("only Get Heads Ext answering 503 (the issue's case)", () => {
  it('30 metadata reads open its breaker alone: then 10 of 10 head(id) reads are answered, and permissions and login', async () => {
    const { t, post, graphql, ready } = await serve();
    t.reference.injectFault('listHeadsExt', { kind: 'status', status: 503 }, 1_000);
    const reads: GraphQLResponse[] = [];
    let linesWhenOpen = 0;
    for (let n = 1; n <= 30; n++) {
      reads.push(JSON.parse((await post(metadataQuery)).text) as GraphQLResponse);
      if (n === 4) linesWhenOpen = t.logLines.length;
    }
    // While it is open, its 26 refusals write no line: no warning, no operation line (OPERATION_LOG=failures).
    expect(t.logLines.slice(linesWhenOpen)).toEqual([]);
    // Three attempts each for reads 1 to 3, the 4th read's first is the 10th failure: then it is open.
    expect(reads.map(codes)).toEqual([
      ...Array(4).fill(['UPSTREAM_ERROR']),
      ...Array(26).fill(['UPSTREAM_UNAVAILABLE']),
    ]);
    expect(t.calls('listHeadsExt')).toHaveLength(10);
    expect(reads[29]!.errors![0]!.extensions).toMatchObject({
      upstream: { operation: 'listHeadsExt', reason: 'circuit open', sent: false },
    });

    // The healthy routes: every one of them still served.
    const ids = t.reference.store.headIds();
    let answered = 0;
    for (const id of ids.slice(0, 10)) {
      const response = await graphql(headQuery, { id });
      if (response.errors === undefined && (response.data as { head: { uuid: string } }).head.uuid === id) answered++;
    }
    expect(answered).toBe(10);
    const login = await graphql('mutation($input: LoginInput!) { login(input: $input) { accessToken } }', {
      input: DEMO_CREDENTIALS,
    });
    expect(login.errors).toBeUndefined();
    const token = (login.data as { login: { accessToken: string } }).login.accessToken;
    const permissions = await graphql('{ permissions(first: 5) { totalCount } }', undefined, {
      authorization: `Bearer ${token}`,
    });
    expect(permissions.errors).toBeUndefined();

    expect(await ready()).toEqual({ status: 200, body: { status: 'ready' } });
    expect(await metric(t, 'gateway_upstream_circuit_state{operation="listHeadsExt"}')).toBe(1);
    for (const operation of operationNames.filter((name) => name !== 'listHeadsExt'))
      expect(await metric(t, `gateway_upstream_circuit_state{operation="${operation}"}`)).toBe(0);
    expect(await metric(t, 'gateway_upstream_host_circuit_state')).toBe(0);
    expect(await metric(t, 'gateway_upstream_circuit_refusals_total{operation="listHeadsExt"}')).toBe(26);
    // One line when it opened; no warning for the 26 calls it refused (the four failed reads have theirs).
    const warnings = t.logLines.filter((line) => line.includes('"level":40'));
    expect(warnings.filter((line) => line.includes('upstream circuit breaker'))).toHaveLength(1);
    expect(warnings.filter((line) => line.includes('"code":"UPSTREAM_ERROR"'))).toHaveLength(4);
    expect(warnings.filter((line) => line.includes('UPSTREAM_UNAVAILABLE'))).toEqual([]);
  });

  it('a refused answer says when to retry (Retry-After, seconds rounded up) and names the operation, never its route, address or token', async () => {
    const { t, post } = await serve();
    t.reference.injectFault('listHeadsExt', { kind: 'status', status: 503 }, 1_000);
    for (let n = 1; n <= 4; n++) await post(metadataQuery, undefined, { authorization: 'Bearer secret-token-123' });
    const refused = await post(metadataQuery, undefined, { authorization: 'Bearer secret-token-123' });
    const body = JSON.parse(refused.text) as GraphQLResponse;
    expect(body.data).toBeNull();
    expect(codes(body)).toEqual(['UPSTREAM_UNAVAILABLE']);
    const retryAfterMs = body.errors![0]!.extensions!.retryAfterMs as number;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(5_000);
    expect(refused.headers.get('retry-after')).toBe(String(Math.ceil(retryAfterMs / 1000)));
    expect(body.errors![0]!.message).toContain('listHeadsExt');
    for (const secret of [
      '/heads/ext',
      '/v2',
      new URL(t.reference.url).host,
      '127.0.0.1',
      'secret-token-123',
      'Bearer',
      'stack',
      '"http"',
    ])
      expect(refused.text).not.toContain(secret);
  });
});

describe('Retry-After goes only on an answer wholly refused by open breakers', () => {
  // A query run again is run by its compiled code (documents/compiled-execution.ts): both ways.
  it.each(['on', 'off'])(
    "is on a head(id) read Get Head By Id's breaker refuses, not on one whose other field is served (COMPILED_EXECUTION=%s)",
    async (compiled) => {
      const { t, post } = await serve({ COMPILED_EXECUTION: compiled });
      const [a, b] = t.reference.store.headIds();
      t.reference.injectFault('getHeadById', { kind: 'status', status: 503 }, 1_000);
      for (let n = 1; n <= 4; n++) await post(headQuery, { id: a });
      const refused = await post(headQuery, { id: a });
      expect(JSON.parse(refused.text)).toMatchObject({
        data: { head: null },
        errors: [{ extensions: { code: 'UPSTREAM_UNAVAILABLE', upstream: { operation: 'getHeadById' } } }],
      });
      expect(refused.headers.get('retry-after')).toMatch(/^[1-5]$/);
      // `updatedAt` is read by Get Head Ext (variant A): that field is served.
      const partial = await post(`query($a: ID!, $b: ID!) { a: head(id: $a) { name } b: head(id: $b) { updatedAt } }`, {
        a,
        b,
      });
      const body = JSON.parse(partial.text) as GraphQLResponse<{ a: unknown; b: { updatedAt: string } | null }>;
      expect(body.data!.a).toBeNull();
      expect(body.data!.b?.updatedAt).toEqual(expect.any(String));
      expect(codes(body)).toEqual(['UPSTREAM_UNAVAILABLE']);
      expect(partial.headers.get('retry-after')).toBeNull();
    },
  );
});

describe('/ready with one breaker per operation (CIRCUIT_BREAKER_WINDOW=1: one failure opens a breaker)', () => {
  /** A GraphQL request whose one upstream call is each operation's. */
  const callOf = (t: TestGateway): Record<OperationName, [string, Record<string, unknown>?]> => {
    const id = t.reference.store.headIds()[0]!;
    return {
      listHeads: ['{ heads(first: 2) { nodes { name } } }'],
      listHeadsExt: [metadataQuery],
      getHeadById: [headQuery, { id }],
      getHeadExtById: ['query($id: ID!) { head(id: $id) { name headMetadata } }', { id }],
      getHeadExt: ['query($id: ID!) { head(id: $id) { updatedAt } }', { id }],
      getPermissions: ['{ permissions(first: 5) { totalCount } }'],
      updateHead: ['mutation($id: ID!) { updateHead(input: { id: $id, name: "x" }) { head { name } } }', { id }],
      deleteHead: ['mutation($id: ID!) { deleteHead(input: { id: $id }) { deletedHeadUuid } }', { id }],
      updateSubscription: ['mutation { updateSubscription(input: { active: true }) { subscription { active } } }'],
      login: ['mutation($input: LoginInput!) { login(input: $input) { accessToken } }', { input: DEMO_CREDENTIALS }],
    };
  };

  it('stays 200 while some operations are open, and is 503 "circuit open" once every one is', async () => {
    const { t, graphql, ready } = await serve({ CIRCUIT_BREAKER_WINDOW: '1', CIRCUIT_BREAKER_MIN_CALLS: '1' });
    const calls = callOf(t);
    for (const [n, operation] of operationNames.entries()) {
      expect(await ready()).toEqual({ status: 200, body: { status: 'ready' } });
      // A 500 is never retried: one failed call opens the operation's breaker.
      t.reference.injectFault(operation, { kind: 'status', status: 500 });
      const [query, variables] = calls[operation];
      expect(codes(await graphql(query, variables, { authorization: 'Bearer anything' }))).toEqual(['UPSTREAM_ERROR']);
      // (Readiness asks Get Heads too, on a connection of its own, outside the breakers.)
      expect(t.calls(operation).filter((call) => call.status === 500)).toHaveLength(1);
      expect(await metric(t, `gateway_upstream_circuit_state{operation="${operation}"}`)).toBe(1);
      expect(
        await metric(t, `gateway_upstream_circuit_state_changes_total{operation="${operation}",state="open"}`),
      ).toBe(1);
      if (n < operationNames.length - 1) continue;
      expect(await ready()).toEqual({ status: 503, body: { status: 'not ready', reason: 'circuit open' } });
    }
  });
});

describe("time waiting for the gateway's own upstream connections (issue 42, point 3)", () => {
  it("is not the route's: calls queued past UPSTREAM_TIMEOUT_MS fail OVERLOADED, unsent, and the breaker stays closed for the next caller", async () => {
    // Two connections, each call 200 ms: three reads of ten heads from three addresses queue 30 calls, most past 1 s.
    // Shedding off: this is about the breakers (the pool's queue would shed the next caller until it drains).
    const { t, graphql } = await serve({
      UPSTREAM_CONNECTIONS: '2',
      UPSTREAM_TIMEOUT_MS: '1000',
      UPSTREAM_DEDUPE: 'false',
      TRUST_PROXY: 'true',
      SHED_MAX_IN_FLIGHT: '0',
      SHED_MAX_UPSTREAM_QUEUED: '0',
      SHED_EVENT_LOOP_DELAY_MS: '0',
    });
    const ids = t.reference.store.headIds();
    t.reference.injectFault('getHeadById', { kind: 'latency', ms: 200 }, 1_000);
    const nodes = 'query($ids: [ID!]!) { nodes(ids: $ids) { ... on Head { uuid } } }';
    const global = (id: string) => Buffer.from(`Head:${id}`).toString('base64');
    const reads = await Promise.all(
      [0, 1, 2].map((caller) =>
        graphql(
          nodes,
          { ids: ids.slice(caller * 10, caller * 10 + 10).map(global) },
          { 'x-forwarded-for': `198.51.100.${caller + 1}` },
        ),
      ),
    );
    const refused = reads.flatMap((read) => (read.errors ?? []).map((error) => error.extensions));
    expect(refused.length).toBeGreaterThan(0);
    for (const extensions of refused)
      expect(extensions).toMatchObject({ code: 'OVERLOADED', upstream: { operation: 'getHeadById', sent: false } });
    // What was refused never reached the upstream: every call it saw was answered.
    expect(t.calls('getHeadById').length).toBe(30 - refused.length);
    expect(await metric(t, 'gateway_upstream_circuit_state{operation="getHeadById"}')).toBe(0);
    t.reference.clearFaults();
    for (let n = 0; n < 3; n++)
      expect((await graphql(headQuery, { id: ids[40] }, { 'x-forwarded-for': '198.51.100.9' })).errors).toBeUndefined();
  });
});
