import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { abuseAttacks, cursor, getFrom, json, nested, updateMetadata } from './support/attacks.js';
import { type Answer, jsonHeaders, post as postTo, startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The regression corpus of the abuse-resistance issue: every attack it reported, as it was sent,
 * is refused with a code, costs no upstream call and no execution beyond its own field, and is
 * answered in a few hundred bytes. Counted, not timed: a `{ __typename }` timed beside each attack
 * is a bench check (bench/checks/held-up.test.ts, `npm run bench:check`). The per-caller attacks
 * (50-id `nodes`, login guessing, slow requests filling the connections) need their limits set:
 * they are in their own block here and in caller-limits.test.ts. The planner's fragment fan-out
 * is in plan.test.ts.
 */

let t: TestGateway;
let id: string;

beforeAll(async () => {
  t = await startTestGateway();
  id = t.reference.store.headIds()[0]!;
});
afterAll(() => t.close());
beforeEach(() => t.reset());

const post = (body: string, headers: Record<string, string> = {}): Promise<Answer> => postTo(t, body, headers);
const get = (search: string): Promise<Answer> => getFrom(t, search);
const attacks = abuseAttacks(() => t);

describe('the attacks of the abuse-resistance issue, in the default configuration', () => {
  it.each(attacks.map((attack) => [attack.name, attack] as const))(
    '%s: refused with its code and no upstream call, in a small answer',
    async (_, attack) => {
      const got = await attack.send();
      expect(got.status, JSON.stringify(got.body)).toBe(attack.status);
      if (attack.refused === 'before execution') expect(got.body).not.toHaveProperty('data');
      else expect(got.body.data).toBeNull();
      expect(got.body.errors?.map((e) => e.extensions?.code)).toEqual([attack.code]);
      expect(t.calls()).toEqual([]);
      // No amplification: the 640 aliases were once answered with 885 KB.
      expect(JSON.stringify(got.body).length).toBeLessThan(1_024);
      // Never an internal error, never a stack, never the input echoed.
      expect(JSON.stringify(got.body)).not.toMatch(
        /INTERNAL_SERVER_ERROR|\s+at \S+:\d+|demo-password|OffsetConnection|\[\[\[/,
      );
    },
  );

  it('the bounds themselves pass: 30 aliases, 32-deep JSON, the largest cursor offset', async () => {
    expect(
      (await post(json(`{ ${Array.from({ length: 30 }, (_, i) => `a${i}: __typename`).join(' ')} }`))).body.errors,
    ).toBeUndefined();
    const deepest = await post(
      `{"query": ${JSON.stringify(updateMetadata)}, "variables": {"id": "${id}", "m": ${'{"a":'.repeat(32)}1${'}'.repeat(32)}}}`,
    );
    expect(deepest.body.errors).toBeUndefined();
    const last = await post(json(`{ heads(first: 1, before: "${cursor(2 ** 31 - 1)}") { totalCount } }`));
    expect(last.body.errors).toBeUndefined();
  });
});

describe('login guessing with RATE_LIMIT_REQUESTS_PER_SECOND=5', () => {
  let limited: TestGateway;
  beforeAll(async () => {
    limited = await startTestGateway({ env: { RATE_LIMIT_REQUESTS_PER_SECOND: '5' } });
  });
  afterAll(() => limited.close());

  it('forwards a burst of 10 guesses from one address and refuses the rest with RATE_LIMITED and no upstream call', async () => {
    const url = await limited.listen();
    const guess = async (i: number) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: jsonHeaders(),
        body: json('mutation($i: LoginInput!) { login(input: $i) { accessToken } }', {
          i: { username: 'demo', password: `guess-${i}` },
        }),
      });
      return {
        status: response.status,
        code: ((await response.json()) as any).errors?.[0]?.extensions?.code as string,
      };
    };
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => guess(i)));
    expect(answers.filter((a) => a.code === 'RATE_LIMITED' && a.status === 429)).toHaveLength(30);
    expect(limited.calls('login')).toHaveLength(10);
  });
});

describe('planted secrets', () => {
  const password = 'pw-Planted-9f3kQ';
  const token = 'tok-Planted-7d2mZ';
  const address = 'http://10.9.8.7:8443/internal/v2/heads';
  const secrets = [password, token, address, '10.9.8.7'];

  it('a password, a token and an upstream-looking URL sent through every error path appear in no response body, header or log line', async () => {
    const logsBefore = t.logLines.length;
    const answers: Answer[] = [];
    const send = async (answerOf: Promise<Answer>) => answers.push(await answerOf);
    const auth = { authorization: `Bearer ${token}` };
    const planted = { password, token, url: address };

    // Variables that fail coercion, in every shape graphql-js words differently.
    await send(
      post(
        json('mutation($i: LoginInput!) { login(input: $i) { accessToken } }', {
          i: { username: address, password, remember: token },
        }),
        auth,
      ),
    );
    await send(
      post(
        json('mutation($i: LoginInput!) { login(input: $i) { accessToken } }', {
          i: { username: 'demo', password: [password, token] },
        }),
      ),
    );
    await send(
      post(
        json('mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { id } } }', {
          i: { id, hairId: `${password}-${address}` },
        }),
        auth,
      ),
    );
    await send(post(json('query($first: Int) { heads(first: $first) { totalCount } }', { first: password })));
    await send(post(json('query($id: ID!) { head(id: $id) { name } }', { id: planted })));
    await send(post(json(updateMetadata, { id, m: { secret: password, deeper: JSON.parse(nested(40)) } })));
    // Literals in the document, valid and not.
    await send(
      post(
        json(
          `mutation { updateHead(input: { id: "${id}", hairId: "${password}", name: "${token}" }) { head { id } } }`,
        ),
      ),
    );
    await send(post(json(`{ head(id: "${address}") { name } }`)));
    await send(post(json(`{ heads(first: "${password}") { totalCount } }`)));
    await send(post(json(`{ "${password}" heads(search: "${token}") }`)));
    await send(post(json(`{ heads(search: """${address}`)));
    // Bodies and parameters that do not parse.
    await send(post(`{"query": "{ __typename }", "variables": ${JSON.stringify(planted)}, "oops": "${password}`));
    await send(post(`{"query": "{ __typename }", "variables": "${password} ${token} ${address}"}`));
    await send(
      get(
        `query=${encodeURIComponent('{ __typename }')}&variables=${encodeURIComponent(`{"p": "${password}", ${token}`)}`,
      ),
    );
    await send(
      get(`query=${encodeURIComponent('{ __typename }')}&extensions=${encodeURIComponent(`${address} ${password}`)}`),
    );
    // Cursors.
    await send(post(json(`{ heads(first: 1, after: "${cursor(password)}") { totalCount } }`)));
    await send(post(json(`{ heads(first: 1, before: "${Buffer.from(address).toString('base64')}") { totalCount } }`)));
    await send(post(json(`{ heads(first: 1, after: "${token}") { totalCount } }`)));
    // Upstream failures whose bodies carry the secrets too.
    const body = { detail: `${password} ${token} ${address}`, token, password, url: address };
    const read = () => post(json(`{ head(id: "${id}") { name url } }`), auth);
    // Three of each: a 502 is retried twice; what is left is cleared before the next.
    const faults = [
      ...[401, 403, 404, 500, 502].map((status) => ({ kind: 'status' as const, status, body })),
      { kind: 'malformed-json' as const },
      { kind: 'off-contract' as const, body },
    ];
    for (const fault of faults) {
      t.reference.clearFaults();
      t.reference.injectFault('getHeadById', fault, 3);
      await send(read());
    }
    t.reference.clearFaults();
    t.reference.injectFault('updateHead', {
      kind: 'status',
      status: 422,
      body: {
        detail: [
          {
            loc: ['body', 'name'],
            msg: `not accepted by ${address} for Bearer ${token}`,
            type: 'value_error',
            input: password,
            ctx: planted,
          },
        ],
      },
    });
    await send(
      post(
        json('mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { id } } }', { i: { id, name: password } }),
        auth,
      ),
    );
    t.reference.injectFault('updateHead', { kind: 'drop' });
    await send(
      post(
        json('mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { id } } }', { i: { id, name: password } }),
        auth,
      ),
    );
    // A token the upstream never issued.
    await send(post(json('{ permissions(first: 1) { totalCount } }'), auth));
    // Logged in for real: the errors of an authorised caller.
    await send(
      post(
        json('mutation($i: LoginInput!) { login(input: $i) { accessToken } }', { i: { username: 'demo', password } }),
      ),
    );

    expect(answers).toHaveLength(29);
    const upstreamHost = new URL(t.reference.url).host;
    const seen = [
      ...answers.map((a) => JSON.stringify(a.body)),
      ...answers.map((a) => JSON.stringify([...a.headers.entries()])),
      ...t.logLines.slice(logsBefore),
    ];
    const hits = seen.filter((text) => secrets.some((secret) => text.includes(secret)) || text.includes(upstreamHost));
    expect(hits).toEqual([]);
    // Every answer said what went wrong with a code, and none blamed the gateway.
    for (const a of answers) {
      expect(a.status).toBeLessThan(500);
      for (const error of a.body.errors ?? [])
        expect(error.extensions?.code, error.message).toEqual(expect.any(String));
      expect(JSON.stringify(a.body)).not.toContain('INTERNAL_SERVER_ERROR');
    }
    // The client's mistakes are not the gateway's errors: no error-level line at all.
    expect(t.logLines.slice(logsBefore).filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
