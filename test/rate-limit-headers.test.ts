import { parseList } from 'structured-headers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Answer, answer, jsonHeaders, post, startTestGateway, type TestGateway } from './support/gateway.js';
import { expectRateLimited, knownToken, ok } from './support/limits.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';

/*
 * The rate-limit headers of an answer (issue 23): the IETF draft's structured `RateLimit-Policy`
 * and `RateLimit`, and the earlier `RateLimit-Limit` / `-Remaining` / `-Reset`, with the values
 * the limiter answered. Each configuration in its own block; the main suite runs without limits.
 * Bursts are sent at once (Promise.all) so that they land in one two-second window whatever the
 * load: counted, not timed.
 */

const oneCall = '{ heads(first: 1) { totalCount } }';
/**
 * A caller of the test's own, by the address a proxy in front names (TRUST_PROXY): a token counts
 * as a caller of its own only once it is known to be real, which the last blocks go through.
 */
const addresses = ['anyone', 'burst', 'sequence', 'another', 'batch', 'browser', 'at-the-door', 'shared', 'window'];
const as = (caller: string) => ({ 'x-forwarded-for': `192.0.2.${addresses.indexOf(caller) + 1}` });

/** A structured-field list as a client's parser reads it: each member's name and integer parameters. */
function policies(value: string | null): Record<string, Record<string, unknown>> {
  expect(value).not.toBeNull();
  return Object.fromEntries(
    parseList(value!).map(([name, params]) => [String(name), Object.fromEntries(params as Map<string, unknown>)]),
  );
}

/** What an answer's headers say of one policy, and the triple. */
function state(a: Answer | { headers: Headers }, policy = 'requests') {
  const item = policies(a.headers.get('ratelimit'))[policy]!;
  return {
    remaining: item.r as number,
    reset: item.t as number,
    triple: {
      limit: Number(a.headers.get('ratelimit-limit')),
      remaining: Number(a.headers.get('ratelimit-remaining')),
      reset: Number(a.headers.get('ratelimit-reset')),
    },
  };
}

const rateLimitHeaders = ['ratelimit', 'ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset'];
const noRateLimitHeaders = (a: { headers: Headers }) => rateLimitHeaders.filter((name) => a.headers.has(name));

describe('without an advertised limit', () => {
  const gateways: TestGateway[] = [];
  afterAll(() => Promise.all(gateways.map((t) => t.close())));

  it('answers carry no rate-limit header: no limit set, or only limits a client cannot pace on (in flight, upstream calls)', async () => {
    for (const env of [
      {},
      { RATE_LIMIT_IN_FLIGHT: '5', RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '50', TRUST_PROXY: 'true' },
    ] as Record<string, string>[]) {
      const t = await startTestGateway({ env });
      gateways.push(t);
      const a = await post(t, { query: oneCall }, as('anyone'));
      expect(ok(a)).toBe(true);
      expect(noRateLimitHeaders(a)).toEqual([]);
    }
  });
});

describe('RATE_LIMIT_REQUESTS_PER_SECOND=5 (a burst of 10)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { RATE_LIMIT_REQUESTS_PER_SECOND: '5', CORS_ORIGINS: 'https://app.example.com', TRUST_PROXY: 'true' },
    });
  });
  afterAll(() => t.close());

  it('each answer says the policy and what is left: a burst of 14 reads 9 down to 0, then four 429s with nothing left and Retry-After', async () => {
    const answers = await Promise.all(Array.from({ length: 14 }, () => post(t, { query: oneCall }, as('burst'))));
    for (const a of answers) {
      expect(a.headers.get('ratelimit-policy')).toBe('"requests";q=10;w=2');
      expect(policies(a.headers.get('ratelimit-policy'))).toEqual({ requests: { q: 10, w: 2 } });
    }
    const served = answers.filter(ok).map((a) => state(a));
    expect(served.map((s) => s.remaining).sort((x, y) => y - x)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    for (const s of served) {
      // The window is two seconds: it turns within 1 or 2 (whole seconds, rounded up).
      expect(s.reset).toBeGreaterThanOrEqual(1);
      expect(s.reset).toBeLessThanOrEqual(2);
      expect(s.triple).toEqual({ limit: 10, remaining: s.remaining, reset: s.reset });
    }
    const refused = answers.filter((a) => !ok(a));
    expect(refused).toHaveLength(4);
    for (const a of refused) {
      expectRateLimited(a, 'requests');
      const s = state(a);
      expect(s.remaining).toBe(0);
      expect(s.triple.remaining).toBe(0);
      expect(String(s.reset)).toBe(a.headers.get('retry-after'));
    }
  });

  it('one after another, each answer has one less left; another caller has a window of its own', async () => {
    const first = state(await post(t, { query: '{ __typename }' }, as('sequence')));
    const second = state(await post(t, { query: '{ __typename }' }, as('sequence')));
    expect([first.remaining, second.remaining]).toEqual([9, 8]);
    expect(state(await post(t, { query: '{ __typename }' }, as('another'))).remaining).toBe(9);
  });

  it('a batch counts each of its operations and tells what is left after the last', async () => {
    const batch = Array.from({ length: 3 }, () => ({ query: '{ __typename }' }));
    const a = await answer(
      await t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: { ...jsonHeaders(), ...as('batch') },
        body: JSON.stringify(batch),
      }),
    );
    expect(a.status).toBe(200);
    expect(state(a).remaining).toBe(7);
  });

  it('over HTTP: the door refuses a caller it refused a moment ago with Retry-After and nothing left; a browser can read the headers (CORS)', async () => {
    const url = await t.listen();
    const send = async (headers: Record<string, string>, body = JSON.stringify({ query: '{ __typename }' })) => {
      const response = await fetch(url, { method: 'POST', headers: { ...jsonHeaders(), ...headers }, body });
      await response.text();
      return response;
    };
    const browser = await send({ ...as('browser'), origin: 'https://app.example.com' });
    expect(browser.status).toBe(200);
    expect(state(browser).remaining).toBe(9);
    expect(browser.headers.get('access-control-expose-headers')?.split(/,\s*/)).toEqual(
      expect.arrayContaining(rateLimitHeaders),
    );

    const statuses = (await Promise.all(Array.from({ length: 11 }, () => send(as('at-the-door'))))).map(
      (r) => r.status,
    );
    expect(statuses.sort()).toEqual([...Array.from({ length: 10 }, () => 200), 429]);
    // A body that would not parse is never read: the intake refuses at once, as the limiter did.
    const door = await send(as('at-the-door'), '{ not json');
    expect(door.status).toBe(429);
    expect(door.headers.get('content-type')).toMatch(/^application\/graphql-response\+json/);
    expect(door.headers.get('retry-after')).toMatch(/^[12]$/);
    expect(door.headers.get('ratelimit-policy')).toBe('"requests";q=10;w=2');
    expect(state(door)).toEqual({
      remaining: 0,
      reset: Number(door.headers.get('retry-after')),
      triple: { limit: 10, remaining: 0, reset: Number(door.headers.get('retry-after')) },
    });
  });
});

describe('RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND=3 beside RATE_LIMIT_REQUESTS_PER_SECOND=5, with TRUST_PROXY', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { RATE_LIMIT_REQUESTS_PER_SECOND: '5', RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: '3', TRUST_PROXY: 'true' },
    });
  });
  afterAll(() => t.close());

  const from = (address: string, authorization: string) => ({ 'x-forwarded-for': address, authorization });

  it("names both policies; the triple follows the one closest to its end; made-up tokens share their address's windows, a known token has its own", async () => {
    const a = await post(t, { query: '{ __typename }' }, from('198.51.100.20', 'Bearer made-up-one'));
    expect(policies(a.headers.get('ratelimit-policy'))).toEqual({ requests: { q: 10, w: 2 }, address: { q: 6, w: 2 } });
    expect(Object.keys(policies(a.headers.get('ratelimit')))).toEqual(['requests', 'address']);
    expect([state(a, 'requests').remaining, state(a, 'address').remaining]).toEqual([9, 5]);
    expect(state(a).triple).toMatchObject({ limit: 6, remaining: 5 });
    // Another made-up token from the same address: the address's windows, both.
    const b = await post(t, { query: '{ __typename }' }, from('198.51.100.20', 'Bearer made-up-two'));
    expect([state(b, 'requests').remaining, state(b, 'address').remaining]).toEqual([8, 4]);
    expect(state(b).triple).toMatchObject({ limit: 6, remaining: 4 });
    // A token the upstream accepted (learnt from another address): its own window, and no address's.
    const known = await knownToken(t, { 'x-forwarded-for': '198.51.100.21' });
    const c = await post(t, { query: '{ __typename }' }, from('198.51.100.20', known));
    expect(policies(c.headers.get('ratelimit'))).toEqual({ requests: { r: 9, t: expect.any(Number) } });
    expect(state(c).triple).toMatchObject({ limit: 10, remaining: 9 });
  });
});

describeWithRedis('RATE_LIMIT_REQUESTS_PER_SECOND=3 with REDIS_URL, two gateways', () => {
  let redis: RedisProcess;
  const gateways: TestGateway[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    const env = { RATE_LIMIT_REQUESTS_PER_SECOND: '3', REDIS_URL: redis.url, TRUST_PROXY: 'true' };
    gateways.push(await startTestGateway({ env }), await startTestGateway({ env }));
  });
  afterAll(async () => {
    await Promise.all(gateways.map((g) => g.close()));
    await redis?.stop();
  });

  it('tells the count they share in Redis: 4 at the first read 5 to 2, the second goes on from there, and its 429 keeps Retry-After', async () => {
    const [a, b] = gateways as [TestGateway, TestGateway];
    const first = await Promise.all(
      Array.from({ length: 4 }, () => post(a, { query: '{ __typename }' }, as('shared'))),
    );
    expect(first.every(ok)).toBe(true);
    expect(first.map((x) => state(x).remaining).sort()).toEqual([2, 3, 4, 5]);
    const second = await Promise.all(
      Array.from({ length: 3 }, () => post(b, { query: '{ __typename }' }, as('shared'))),
    );
    const served = second.filter(ok);
    expect(served.map((x) => state(x).remaining).sort()).toEqual([0, 1]);
    for (const x of [...first, ...served]) {
      expect(x.headers.get('ratelimit-policy')).toBe('"requests";q=6;w=2');
      expect(state(x).reset).toBeGreaterThanOrEqual(1);
      expect(state(x).reset).toBeLessThanOrEqual(2);
    }
    const refused = second.find((x) => !ok(x))!;
    expectRateLimited(refused, 'requests');
    expect(state(refused)).toMatchObject({ remaining: 0, reset: Number(refused.headers.get('retry-after')) });
  });
});

describe('RATE_LIMIT_REQUESTS_PER_SECOND=2 over RATE_LIMIT_WINDOW_SECONDS=5 (a burst of 10)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { RATE_LIMIT_REQUESTS_PER_SECOND: '2', RATE_LIMIT_WINDOW_SECONDS: '5', TRUST_PROXY: 'true' },
    });
  });
  afterAll(() => t.close());

  it('a caller may spend the whole window at once: ten served, then refused; the policy says the quota and the window', async () => {
    const answers = await Promise.all(Array.from({ length: 12 }, () => post(t, { query: oneCall }, as('window'))));
    for (const a of answers) expect(policies(a.headers.get('ratelimit-policy'))).toEqual({ requests: { q: 10, w: 5 } });
    expect(
      answers
        .filter(ok)
        .map((a) => state(a).remaining)
        .sort((x, y) => y - x),
    ).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    const refused = answers.filter((a) => !ok(a));
    expect(refused).toHaveLength(2);
    for (const a of refused) {
      expect(a.status).toBe(429);
      expect(a.body.errors).toEqual([
        expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', limit: 'requests' }) }),
      ]);
      // The window turns within its five seconds (whole seconds, rounded up).
      expect(a.headers.get('retry-after')).toMatch(/^[1-5]$/);
    }
  });
});
