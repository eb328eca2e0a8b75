import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { jsonHeaders, post as postTo, startTestGateway, type TestGateway } from './support/gateway.js';
import { expectRateLimited, knownToken, ok, refusals } from './support/limits.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { until } from './support/until.js';

/*
 * The caller limits' edges (issue 22): an incremental answer keeps its in-flight slot until its
 * last part; the caller key does not change with the spelling of the auth scheme; the per-address
 * limit holds however many tokens an address makes up. Counted, not timed.
 */

const oneCall = '{ heads(first: 1) { totalCount } }';
const deferred = 'query($id: ID!) { head(id: $id) { name ... @defer { headMetadata } } }';

/** An incremental answer read part by part: its first part, then the rest on demand. */
async function openStream(
  response: Response,
): Promise<{ first: Record<string, any>; rest: () => Promise<Record<string, any>[]> }> {
  expect(response.headers.get('content-type')).toMatch(/^multipart\/mixed/);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const parts = () =>
    text
      .split(/\r?\n/)
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, any>);
  while (parts().length === 0) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const first = parts()[0]!;
  return {
    first,
    async rest() {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return parts().slice(1);
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}

describe('RATE_LIMIT_IN_FLIGHT=2 with @defer', () => {
  let t: TestGateway;
  let ids: string[];
  beforeAll(async () => {
    t = await startTestGateway({ env: { RATE_LIMIT_IN_FLIGHT: '2' } });
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  const ask = (id: string, headers: Record<string, string>, signal?: AbortSignal) =>
    t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'multipart/mixed', ...headers },
      body: JSON.stringify({ query: deferred, variables: { id } }),
      ...(signal ? { signal } : {}),
    });

  it('holds the slot until the last part: a third operation is refused while two deferred parts are pending, and served once they are out', async () => {
    const caller = { authorization: 'Bearer deferring-caller' };
    t.reference.injectFault('getHeadExtById', { kind: 'latency', ms: 60_000 }, 2);
    const a = await openStream(await ask(ids[0]!, caller));
    const b = await openStream(await ask(ids[1]!, caller));
    expect([a.first.hasNext, b.first.hasNext]).toEqual([true, true]);
    await until(
      () => t.reference.maxInFlight() >= 2 && t.calls('getHeadExtById').length === 2,
      'both deferred reads at the upstream',
    );
    // Before: the slots came back with the first parts, and this one ran beside the two.
    expectRateLimited(await postTo(t, { query: oneCall }, caller), 'in_flight');
    expect(t.calls('listHeads')).toHaveLength(0);
    t.reference.releaseHeld();
    const [restA, restB] = await Promise.all([a.rest(), b.rest()]);
    expect(restA.flatMap((part) => part.incremental ?? []).map((d: any) => Object.keys(d.data))).toEqual([
      ['headMetadata'],
    ]);
    expect(restB.at(-1)!.hasNext).toBe(false);
    expect(ok(await postTo(t, { query: oneCall }, caller))).toBe(true);
  });

  it('gives the slot back when the client hangs up in the middle of the stream (over HTTP)', async () => {
    const url = await t.listen();
    const caller = { authorization: 'Bearer hanging-up-caller' };
    const overHttp = (id: string, signal?: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'multipart/mixed', ...caller },
        body: JSON.stringify({ query: deferred, variables: { id } }),
        ...(signal ? { signal } : {}),
      });
    const plain = async () => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { ...jsonHeaders(), ...caller },
        body: JSON.stringify({ query: oneCall }),
      });
      await response.text();
      return response.status;
    };
    t.reference.injectFault('getHeadExtById', { kind: 'latency', ms: 60_000 }, 2);
    const hangingUp = new AbortController();
    const a = await openStream(await overHttp(ids[2]!, hangingUp.signal));
    const b = await openStream(await overHttp(ids[3]!));
    expect([a.first.hasNext, b.first.hasNext]).toEqual([true, true]);
    expect(await plain()).toBe(429);
    hangingUp.abort();
    await a.rest().catch(() => undefined);
    // One slot back (the hung-up stream's), the other still held by the stream being read.
    await until(async () => (await plain()) === 200, 'a slot given back after the hang-up');
    t.reference.releaseHeld();
    expect((await b.rest()).at(-1)!.hasNext).toBe(false);
  });
});

describe('the caller key, with RATE_LIMIT_REQUESTS_PER_SECOND=5 (a burst of 10)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    // Each operation's own upstream calls are counted: identical concurrent reads would share one (UPSTREAM_DEDUPE).
    t = await startTestGateway({ env: { RATE_LIMIT_REQUESTS_PER_SECOND: '5', UPSTREAM_DEDUPE: 'false' } });
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  it('is one caller however the scheme is cased and however many spaces follow it: 14 spellings of one token get 10 operations; the upstream gets the header as sent', async () => {
    // Tokens the upstream accepted: each a caller of its own (a made-up one counts as its address).
    const [one, other] = [(await knownToken(t)).slice('Bearer '.length), await knownToken(t)];
    const spellings = [
      'Bearer',
      'bearer',
      'BEARER',
      'BeArEr',
      'bEARER',
      'Bearer ',
      'Bearer  ',
      'bearer   ',
      'BEARER    ',
      'beaRer',
      'BEarer',
      'bearER',
      'BeareR',
      'bEaReR',
    ].map((scheme) => `${scheme} ${one}`);
    const answers = await Promise.all(
      spellings.map((authorization) => postTo(t, { query: oneCall }, { authorization: `  ${authorization}  ` })),
    );
    expect(answers.filter(ok)).toHaveLength(10);
    for (const a of answers.filter((x) => !ok(x))) expectRateLimited(a, 'requests');
    expect(t.calls('listHeads')).toHaveLength(10);
    // Forwarded as the client wrote it (the surrounding whitespace is not part of a header's value).
    const sent = t.calls('listHeads').map((r) => r.headers.authorization);
    expect(sent.every((value) => spellings.some((spelling) => spelling.trim() === value))).toBe(true);
    // Another token is another caller; so is a header RFC 6750 does not read as the token (a tab for the space).
    expect(ok(await postTo(t, { query: oneCall }, { authorization: other }))).toBe(true);
    expect(ok(await postTo(t, { query: oneCall }, { authorization: `Bearer\t${one}` }))).toBe(true);
    expect(ok(await postTo(t, { query: oneCall }, { authorization: `BEARER \t ${one}` }))).toBe(true);
  });
});

describe('RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND=5 (a burst of 10), with TRUST_PROXY', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: '5', RATE_LIMIT_REQUESTS_PER_SECOND: '5', TRUST_PROXY: 'true' },
    });
  });
  afterAll(() => t.close());
  beforeEach(() => t.reset());

  const from = (address: string, token?: string) => ({
    'x-forwarded-for': address,
    ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
  });

  it('counts every operation of an address, a fresh token each time or none: the 11th is refused with 429, limit "address" and no upstream call; another address is served', async () => {
    const before = await refusals(t, 'address');
    const minted = await Promise.all(
      Array.from({ length: 12 }, (_, i) => postTo(t, { query: oneCall }, from('198.51.100.7', `minted-${i}`))),
    );
    const tokenless = await Promise.all(
      Array.from({ length: 2 }, () => postTo(t, { query: oneCall }, from('198.51.100.7'))),
    );
    const answers = [...minted, ...tokenless];
    expect(answers.filter(ok)).toHaveLength(10);
    const refused = answers.filter((a) => !ok(a));
    expect(refused).toHaveLength(4);
    for (const a of refused) expectRateLimited(a, 'address');
    expect(refused[0]!.body.errors![0]!.message).toMatch(
      /^Too many operations from this address: try again in [12] s\.$/,
    );
    expect(t.calls('listHeads')).toHaveLength(10);
    expect(await refusals(t, 'address')).toBe(before + 4);
    expect(ok(await postTo(t, { query: oneCall }, from('198.51.100.8', 'minted-0')))).toBe(true);
  });

  it('over HTTP, an address refused a moment ago is refused at the door, a new token or not', async () => {
    const url = await t.listen();
    const send = async (headers: Record<string, string>, body = JSON.stringify({ query: oneCall })) => {
      const response = await fetch(url, { method: 'POST', headers: { ...jsonHeaders(), ...headers }, body });
      return { status: response.status, body: (await response.json()) as any };
    };
    const statuses = await Promise.all(Array.from({ length: 11 }, (_, i) => send(from('198.51.100.9', `door-${i}`))));
    expect(statuses.map((a) => a.status).sort()).toEqual([...Array.from({ length: 10 }, () => 200), 429]);
    // A body that would not parse is never read: the intake stage refuses it first.
    const door = await send(from('198.51.100.9', 'door-new'), '{ not json');
    expect(door).toEqual({
      status: 429,
      body: {
        errors: [
          {
            message: expect.stringMatching(/^Too many operations from this address/),
            extensions: { code: 'RATE_LIMITED', limit: 'address', retryAfterSeconds: expect.any(Number) },
          },
        ],
      },
    });
    expect(t.calls('listHeads')).toHaveLength(10);
  });
});

describeWithRedis('RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND with REDIS_URL', () => {
  let redis: RedisProcess;
  const gateways: TestGateway[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    const env = { RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: '3', TRUST_PROXY: 'true', REDIS_URL: redis.url };
    gateways.push(await startTestGateway({ env }), await startTestGateway({ env }));
  });
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.close()));
    await redis?.stop();
  });

  it('is one window for the address across gateways: 6 at the first use it up, the second refuses the 7th', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const headers = (i: number) => ({ 'x-forwarded-for': '203.0.113.50', authorization: `Bearer shared-${i}` });
    const first = await Promise.all(
      Array.from({ length: 6 }, (_, i) => postTo(a, { query: '{ __typename }' }, headers(i))),
    );
    expect(first.every(ok)).toBe(true);
    expectRateLimited(await postTo(b, { query: '{ __typename }' }, headers(6)), 'address');
  });
});
