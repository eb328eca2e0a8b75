import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALICE_PASSWORD, ALICE_USERNAME, DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { tokenCallerOf } from '../src/server/callers.js';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';
import { knownToken } from './support/limits.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';

/*
 * Who a signed-in user is, for the limits (server/traffic/known-tokens.ts, login-limits.ts): every
 * token the gateway's login issues to one account is that account; logins are limited per account
 * and per address; and what the gateway knows outlives its process, with REDIS_URL. Callers told
 * apart by address (TRUST_PROXY, X-Forwarded-For), over the gateway's own door.
 */

const LOGIN = 'mutation($input: LoginInput!) { login(input: $input) { accessToken } }';
const from = (address: string, headers: Record<string, string> = {}) => ({ 'x-forwarded-for': address, ...headers });

/** A login through the gateway, from `address`: its token, or the refusal's code. */
async function login(
  t: TestGateway,
  address: string,
  username: string,
  password: string,
): Promise<{ token?: string; code?: unknown }> {
  const answer = await post(t, { query: LOGIN, variables: { input: { username, password } } }, from(address));
  const token = (answer.body.data as { login?: { accessToken: string } } | null | undefined)?.login?.accessToken;
  return token === undefined ? { code: answer.body.errors?.[0]?.extensions?.code } : { token: `Bearer ${token}` };
}

const status = async (t: TestGateway, address: string, authorization?: string) =>
  (await post(t, { query: '{ __typename }' }, from(address, authorization === undefined ? {} : { authorization })))
    .status;

describe('RATE_LIMIT_REQUESTS_PER_SECOND=2 (four a window), RATE_LIMIT_LOGINS_PER_MINUTE=20, TRUST_PROXY=1', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { RATE_LIMIT_REQUESTS_PER_SECOND: '2', RATE_LIMIT_LOGINS_PER_MINUTE: '20', TRUST_PROXY: '1' },
    });
  });
  afterAll(() => t.close());

  it('ten logins of one account are one caller: twenty quick requests with their ten tokens get one window’s four', async () => {
    const tokens: string[] = [];
    for (let i = 1; i <= 10; i++)
      tokens.push((await login(t, `10.5.0.${i}`, DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)).token!);
    expect(new Set(tokens).size).toBe(10);
    const statuses = await Promise.all(
      tokens.flatMap((token) => [status(t, '10.5.1.1', token), status(t, '10.5.1.1', token)]),
    );
    expect(statuses.filter((code) => code === 200)).toHaveLength(4);
    expect(statuses.filter((code) => code === 429)).toHaveLength(16);
  });
});

describe('RATE_LIMIT_LOGINS_PER_MINUTE=3, RATE_LIMIT_ADDRESS_LOGINS_PER_MINUTE=5, TRUST_PROXY=1', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      env: { RATE_LIMIT_LOGINS_PER_MINUTE: '3', RATE_LIMIT_ADDRESS_LOGINS_PER_MINUTE: '5', TRUST_PROXY: '1' },
    });
  });
  afterAll(() => t.close());

  it('an account’s fourth login in a minute, from anywhere, is refused with no upstream call', async () => {
    t.reset();
    const answers = [];
    for (let i = 1; i <= 4; i++) answers.push(await login(t, `10.6.0.${i}`, ALICE_USERNAME, ALICE_PASSWORD));
    expect(answers.map((answer) => (answer.token === undefined ? answer.code : 'issued'))).toEqual([
      'issued',
      'issued',
      'issued',
      'RATE_LIMITED',
    ]);
    expect(t.calls('login')).toHaveLength(3);
  });

  it('an address’s sixth login in a minute, whatever the accounts (a wrong password too), is refused', async () => {
    t.reset();
    const accounts = ['viewer', 'nobody-1', 'nobody-2', 'nobody-3', 'nobody-4', 'nobody-5'];
    const answers = [];
    for (const username of accounts) answers.push((await login(t, '10.6.1.1', username, 'not the password')).code);
    expect(answers.slice(0, 5).every((code) => code !== 'RATE_LIMITED')).toBe(true);
    expect(answers[5]).toBe('RATE_LIMITED');
    expect(t.calls('login')).toHaveLength(5);
  });
});

describeWithRedis(
  'known tokens outlive the process (REDIS_URL, RATE_LIMIT_REQUESTS_PER_SECOND=3: six a window, TRUST_PROXY=1)',
  () => {
    let redis: RedisProcess;
    let reference: ReferenceUpstream;
    let t: TestGateway | undefined;
    const env = () => ({ REDIS_URL: redis.url, RATE_LIMIT_REQUESTS_PER_SECOND: '3', TRUST_PROXY: '1' });
    beforeAll(async () => {
      [redis, reference] = await Promise.all([startRedis(), startReferenceUpstream()]);
    });
    afterAll(async () => {
      await t?.close();
      await Promise.all([redis?.stop(), reference?.close()]);
    });

    it('two signed-in users behind one address keep their own windows across a restart: one’s burst leaves the other served', async () => {
      const first = await startTestGateway({ env: env(), reference });
      const demo = (await login(first, '10.7.0.1', DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)).token!;
      const alice = (await login(first, '10.7.0.2', ALICE_USERNAME, ALICE_PASSWORD)).token!;
      const accepted = await knownToken(first, from('10.7.0.3'));
      // The restart: the process gone, a new one on the same Redis (and the same upstream, whose tokens stay valid).
      await first.close();
      t = await startTestGateway({ env: env(), reference });
      for (const token of [demo, alice, accepted]) expect(t.knownTokens.callerOf(tokenCallerOf(token)!)).toBeDefined();
      // Behind one office address: demo's whole burst (six) is its own, and alice, then the address, still have theirs.
      const burst = await Promise.all(Array.from({ length: 6 }, () => status(t!, '10.7.1.1', demo)));
      expect(burst).toEqual(Array(6).fill(200));
      expect(await status(t, '10.7.1.1', alice)).toBe(200);
      expect(await status(t, '10.7.1.1')).toBe(200);
      expect(await status(t, '10.7.1.1', demo)).toBe(429);
    });
  },
);
