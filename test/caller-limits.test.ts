import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type Answer,
  answer,
  jsonHeaders,
  post as postTo,
  startTestGateway,
  type TestGateway,
} from './support/gateway.js';
import { expectRateLimited, knownToken, ok, refusals } from './support/limits.js';
import { until } from './support/until.js';

/*
 * Per-caller limits, each in its own block with only its variable set (the main suite runs
 * without any). A caller is its bearer token once that token is known to be real or, until then
 * and without one, its client address: the blocks tell callers apart by address (TRUST_PROXY and
 * X-Forwarded-For), 'who a caller is' by token. Refusals are counted, not timed: HTTP 429,
 * Retry-After, RATE_LIMITED, zero upstream calls. Bursts are sent at once (Promise.all) so that
 * all of them land in one two-second window whatever the load.
 */

/** A caller of its own: a client address, as a proxy in front names it (TRUST_PROXY). */
const from = (address: string, authorization?: string): Record<string, string> => ({
  'x-forwarded-for': address,
  ...(authorization === undefined ? {} : { authorization }),
});
const callerA = from('192.0.2.1');
const callerB = from('192.0.2.2');

const post = (
  t: TestGateway,
  query: string,
  headers: Record<string, string> = {},
  variables?: Record<string, unknown>,
): Promise<Answer> => postTo(t, { query, variables }, headers);

const oneCall = '{ heads(first: 1) { totalCount } }';

describe('RATE_LIMIT_REQUESTS_PER_SECOND=5 (a burst of 10)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    // Each operation's own upstream calls are counted: identical concurrent reads would share one (UPSTREAM_DEDUPE).
    // The upstream queue is not watched by the load shedder here: a flood's operations arrive over the socket one by
    // one, and once the first ten's 500 calls queue for connections the shedder would refuse the rest first
    // (test/load-shedding.test.ts holds that); this block is about the limit.
    t = await startTestGateway({
      env: {
        RATE_LIMIT_REQUESTS_PER_SECOND: '5',
        UPSTREAM_DEDUPE: 'false',
        TRUST_PROXY: 'true',
        SHED_MAX_UPSTREAM_QUEUED: '0',
      },
    });
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  it('serves a caller 10 operations at once and refuses the next ones with 429, Retry-After and no upstream call; another caller is served', async () => {
    // A caller of its own, and counts from here: the tests of this block may run in any order.
    const refusedBefore = await refusals(t, 'requests');
    const answers = await Promise.all(Array.from({ length: 14 }, () => post(t, oneCall, from('192.0.2.10'))));
    expect(answers.filter(ok)).toHaveLength(10);
    const refused = answers.filter((a) => !ok(a));
    expect(refused).toHaveLength(4);
    for (const a of refused) expectRateLimited(a, 'requests');
    expect(t.calls('listHeads')).toHaveLength(10);
    expect(await refusals(t, 'requests')).toBe(refusedBefore + 4);
    // Caller B has a window of its own.
    expect(ok(await post(t, oneCall, from('192.0.2.11')))).toBe(true);
  });

  it('over HTTP, a caller refused a moment ago is refused at the door (before its body is read), the same way; other paths and callers are untouched', async () => {
    const url = await t.listen();
    const send = async (headers: Record<string, string>, body = JSON.stringify({ query: oneCall })) => {
      const response = await fetch(url, { method: 'POST', headers: { ...jsonHeaders(), ...headers }, body });
      return { status: response.status, headers: response.headers, body: (await response.json()) as any };
    };
    const caller = from('192.0.2.12');
    const first = await Promise.all(Array.from({ length: 11 }, () => send(caller)));
    expect(first.map((a) => a.status).sort()).toEqual([...Array.from({ length: 10 }, () => 200), 429]);
    // Answered in the media type asked for first, by the limiter as at the door.
    expect(first.find((a) => a.status === 429)!.headers.get('content-type')).toMatch(
      /^application\/graphql-response\+json/,
    );
    const before = await refusals(t, 'requests');
    // Not even a body that would not parse is read now.
    const door = await send(caller, '{ not json');
    expect(door.status).toBe(429);
    expect(door.headers.get('retry-after')).toMatch(/^[12]$/);
    expect(door.headers.get('content-type')).toMatch(/^application\/graphql-response\+json/);
    expect(door.body).toEqual({
      errors: [
        {
          message: expect.stringMatching(/^Too many operations/),
          extensions: { code: 'RATE_LIMITED', limit: 'requests', retryAfterSeconds: expect.any(Number) },
        },
      ],
    });
    expect(await refusals(t, 'requests')).toBe(before + 1);
    expect(t.calls('listHeads')).toHaveLength(10);
    // A browser's request (Origin) gets the same.
    const browser = await send({ ...caller, origin: 'https://app.example.com' });
    expect(browser.status).toBe(429);
    expect(browser.headers.get('content-type')).toMatch(/^application\/graphql-response\+json/);
    expect((await fetch(url.replace('/graphql', '/health'), { headers: caller })).status).toBe(200);
    expect((await send(from('192.0.2.13'))).status).toBe(200);
  });

  it('counts each operation of a batch; the refused ones get RATE_LIMITED inside the batch', async () => {
    const batch = Array.from({ length: 4 }, () => ({ query: oneCall }));
    const caller = from('192.0.2.14');
    await Promise.all(Array.from({ length: 8 }, () => post(t, oneCall, caller)));
    const response = await answer(
      await t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: { ...jsonHeaders(), ...caller },
        body: JSON.stringify(batch),
      }),
    );
    const results = response.body as unknown as { data?: unknown; errors?: { extensions?: { code?: string } }[] }[];
    expect(results.map((r) => (r.errors === undefined ? 'ok' : r.errors[0]!.extensions!.code))).toEqual([
      'ok',
      'ok',
      'RATE_LIMITED',
      'RATE_LIMITED',
    ]);
    // 8 alone, and one for the batch's two: its operations share their reads.
    expect(t.calls('listHeads')).toHaveLength(9);
  });

  it('one caller flooding costs the gateway its limit and no more: 10 of its 40 fifty-id operations reach the upstream, another caller is served beside them', async () => {
    const fifty = `{ nodes(ids: ${JSON.stringify(t.reference.store.headIds().slice(0, 50))}) { id } }`;
    const refusedBefore = await refusals(t, 'requests');
    // One caller asks 50 upstream calls 40 times at once; another asks once meanwhile.
    const [flood, probe] = await Promise.all([
      Promise.all(Array.from({ length: 40 }, () => post(t, fifty, from('192.0.2.15')))),
      post(t, oneCall, from('192.0.2.16')),
    ]);
    expect(ok(probe)).toBe(true);
    expect(flood.filter(ok)).toHaveLength(10);
    for (const a of flood.filter((x) => !ok(x))) expectRateLimited(a, 'requests');
    expect(await refusals(t, 'requests')).toBe(refusedBefore + 30);
    // Unlimited, the 40 would have made 2,000 calls beside the bystander's one; the 30 refused made none.
    expect(t.calls()).toHaveLength(10 * 50 + 1);
    expect(t.calls('listHeads')).toHaveLength(1);
  });
});

describe('RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND=50 (a burst of 100), charged with the plan before execution', () => {
  let t: TestGateway;
  let ids: string[];
  beforeAll(async () => {
    // Each operation's own upstream calls are counted: identical concurrent reads would share one (UPSTREAM_DEDUPE).
    t = await startTestGateway({
      env: { RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '50', UPSTREAM_DEDUPE: 'false', TRUST_PROXY: 'true' },
    });
    ids = t.reference.store.headIds().slice(0, 50);
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  const fifty = 'query Fifty($ids: [ID!]!) { nodes(ids: $ids) { id ... on Head { name } } }';

  it('nodes(ids:) with 50 ids costs 50: two pass, the third is refused with no upstream call; a query of no calls still runs', async () => {
    const answers = await Promise.all(Array.from({ length: 3 }, () => post(t, fifty, callerA, { ids })));
    expect(answers.filter(ok)).toHaveLength(2);
    expectRateLimited(answers.find((a) => !ok(a))!, 'upstream_calls');
    expect(t.calls()).toHaveLength(100);
    expect(await refusals(t, 'upstream_calls')).toBe(1);
    // Nothing to charge: `{ __typename }` plans no call.
    expect((await post(t, '{ __typename }', callerA)).body).toEqual({ data: { __typename: 'Query' } });
    expect(ok(await post(t, fifty, callerB, { ids }))).toBe(true);
    expect(t.calls()).toHaveLength(150);
  });
});

describe('RATE_LIMIT_IN_FLIGHT=2', () => {
  let t: TestGateway;
  let ids: string[];
  beforeAll(async () => {
    // 150 operations at once pass the process's own cap (UPSTREAM_CONNECTIONS) while they are
    // refused: off here, where the caller's cap is what is tried. Each operation's own upstream
    // calls are counted: identical concurrent reads would share one (UPSTREAM_DEDUPE).
    t = await startTestGateway({
      env: {
        RATE_LIMIT_IN_FLIGHT: '2',
        UPSTREAM_CONNECTIONS: '16',
        SHED_MAX_IN_FLIGHT: '0',
        UPSTREAM_DEDUPE: 'false',
        TRUST_PROXY: 'true',
      },
    });
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  it('150 slow operations of one caller hold 2 upstream calls at most; another caller is answered while they wait', async () => {
    // Every listing is held by the upstream until released; the gateway has 16 upstream connections.
    const refusedBefore = await refusals(t, 'in_flight');
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 150);
    let servedA = 0;
    const slow = Array.from({ length: 150 }, () =>
      post(t, oneCall, callerA).then((a) => {
        if (ok(a)) servedA++;
        return a;
      }),
    );
    const b = await post(t, `{ head(id: "${ids[0]}") { name } }`, callerB);
    expect(ok(b)).toBe(true);
    // B went straight through. Unlimited, A's first 16 would have held every connection, and B
    // would have come after at least 16 of them.
    expect(servedA).toBe(0);
    await until(() => t.reference.inFlight() === 2, "the caller's two listings held");
    expect(t.reference.releaseHeld()).toBe(2);
    const answers = await Promise.all(slow);
    expect(answers.filter(ok)).toHaveLength(2);
    for (const a of answers.filter((x) => !ok(x))) expectRateLimited(a, 'in_flight');
    expect(t.reference.maxInFlight()).toBeLessThanOrEqual(3);
    expect(t.calls('listHeads')).toHaveLength(2);
    expect(await refusals(t, 'in_flight')).toBe(refusedBefore + 148);
    // The slots came back: A is served again.
    t.reference.clearFaults();
    expect(ok(await post(t, oneCall, callerA))).toBe(true);
  });

  it("made-up tokens share their address's slots: from one address, three tokens' slow reads hold two, the third is refused", async () => {
    t.reference.injectFault('listHeads', { kind: 'latency', ms: 600_000 }, 3);
    const reads = ['one', 'two', 'three'].map((name) => post(t, oneCall, from('192.0.2.20', `Bearer made-up-${name}`)));
    await until(() => t.reference.inFlight() === 2, "the address's two listings held");
    const refused = await Promise.race(reads);
    expectRateLimited(refused, 'in_flight');
    expect(t.reference.releaseHeld()).toBe(2);
    expect((await Promise.all(reads)).filter(ok)).toHaveLength(2);
  });

  it('gives a slot back however the operation ended: refused input, a syntax error, a batch', async () => {
    const caller = from('192.0.2.17');
    for (let i = 0; i < 3; i++) {
      expect((await post(t, '{ heads(first: 0) { totalCount } }', caller)).body.errors?.[0]?.extensions?.code).toBe(
        'BAD_USER_INPUT',
      );
      expect((await post(t, '{ heads(first: 1) { totalCount }', caller)).body.errors?.[0]?.extensions?.code).toBe(
        'GRAPHQL_PARSE_FAILED',
      );
      const batch = await t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: { ...jsonHeaders(), ...caller },
        body: JSON.stringify([{ query: oneCall }, { query: '{' }]),
      });
      expect(batch.status).toBe(200);
      await batch.text();
    }
    const both = await Promise.all([post(t, oneCall, caller), post(t, oneCall, caller)]);
    expect(both.every(ok)).toBe(true);
  });
});

describe('who a caller is', () => {
  let t: TestGateway;
  let proxied: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ env: { RATE_LIMIT_REQUESTS_PER_SECOND: '1' } });
    proxied = await startTestGateway({ env: { RATE_LIMIT_REQUESTS_PER_SECOND: '1', TRUST_PROXY: 'true' } });
  });
  afterAll(async () => {
    await t.close();
    await proxied.close();
  });

  const overHttp = async (url: string, headers: Record<string, string>) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: { ...jsonHeaders(), ...headers },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    await response.text();
    return response.status;
  };

  it('without a token, its address: two clients on one address share a window; X-Forwarded-For counts only with TRUST_PROXY', async () => {
    const url = await t.listen();
    const statuses = await Promise.all([
      overHttp(url, { 'x-forwarded-for': '203.0.113.1' }),
      overHttp(url, { 'x-forwarded-for': '203.0.113.2' }),
      overHttp(url, { 'x-forwarded-for': '203.0.113.3' }),
    ]);
    expect(statuses.sort()).toEqual([200, 200, 429]);

    const proxiedUrl = await proxied.listen();
    const byHop = await Promise.all(
      ['203.0.113.1, 10.0.0.1', '203.0.113.2, 10.0.0.1', '203.0.113.3', '203.0.113.3'].map((hops) =>
        overHttp(proxiedUrl, { 'x-forwarded-for': hops }),
      ),
    );
    expect(byHop).toEqual([200, 200, 200, 200]);
    expect(await overHttp(proxiedUrl, { 'x-forwarded-for': '203.0.113.3' })).toBe(429);
  });

  it("with a token known to be real, the token: the same address with two such tokens has two windows; made-up tokens share their address's", async () => {
    const url = await proxied.listen();
    // Each learnt by a read from an address of its own (whose window that read uses).
    const [one, two] = [
      await knownToken(proxied, from('198.51.100.1')),
      await knownToken(proxied, from('198.51.100.2')),
    ];
    const shared = '198.51.100.3';
    const statuses = await Promise.all([
      overHttp(url, from(shared, one)),
      overHttp(url, from(shared, one)),
      overHttp(url, from(shared, two)),
    ]);
    expect(statuses).toEqual([200, 200, 200]);
    expect(await overHttp(url, from(shared, one))).toBe(429);
    // Tokens the gateway has not seen accepted, however many, have the address's one window.
    const madeUp = await Promise.all(
      ['a', 'b', 'c'].map((name) => overHttp(url, from('198.51.100.4', `Bearer made-up-${name}`))),
    );
    expect(madeUp.sort()).toEqual([200, 200, 429]);
  });
});

describe('TRUST_PROXY naming the proxies in front (1, or loopback), over HTTP from 127.0.0.1', () => {
  const gateways: TestGateway[] = [];
  afterAll(() => Promise.all(gateways.map((g) => g.close())));

  it.each(['1', 'loopback'])(
    'TRUST_PROXY=%s: the client is the hop the trusted proxy wrote, so a client writing its own leftmost hops still has one window',
    async (trust) => {
      const t = await startTestGateway({ env: { RATE_LIMIT_REQUESTS_PER_SECOND: '1', TRUST_PROXY: trust } });
      gateways.push(t);
      const url = await t.listen();
      const send = async (forwardedFor: string) => {
        const response = await fetch(url, {
          method: 'POST',
          headers: { ...jsonHeaders(), 'x-forwarded-for': forwardedFor },
          body: JSON.stringify({ query: '{ __typename }' }),
        });
        await response.text();
        return response.status;
      };
      // The proxy (this test, at 127.0.0.1) appended 198.51.100.9 to what its client sent.
      const spoofed = await Promise.all(
        ['203.0.113.1', '203.0.113.2', '203.0.113.3'].map((made) => send(`${made}, 198.51.100.9`)),
      );
      expect(spoofed.sort()).toEqual([200, 200, 429]);
      expect(await send('198.51.100.10')).toBe(200);
    },
  );
});

describe('RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND=1 (two a window) and a token known to be real', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ env: { RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: '1', TRUST_PROXY: 'true' } });
  });
  afterAll(() => t.close());

  it('binds made-up tokens and none at their address, never a caller whose token the upstream accepted', async () => {
    // Accepted by Get Permissions (from another address, whose window it uses): known from then on.
    const token = await knownToken(t, from('198.51.100.50'));
    const shared = '198.51.100.60';
    const made = [];
    for (let i = 0; i < 3; i++)
      made.push(await postTo(t, { query: '{ __typename }' }, from(shared, `Bearer made-up-${i}`)));
    expect(made.map(ok)).toEqual([true, true, false]);
    expectRateLimited(made[2]!, 'address');
    // The known caller, from the address made-up tokens exhausted: its own limits alone.
    for (let i = 0; i < 3; i++)
      expect(ok(await postTo(t, { query: '{ __typename }' }, from(shared, token)))).toBe(true);
  });
});
