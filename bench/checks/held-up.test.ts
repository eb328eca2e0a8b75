import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { abuseAttacks, fanOut, json, plainOfLength } from '../../test/support/attacks.js';
import { post, startTestGateway, type TestGateway } from '../../test/support/gateway.js';
import { ok } from '../../test/support/limits.js';
import { median, slowdown } from './latency.js';

/*
 * Wall-clock twins of product tests that count instead (`npm run bench:check`, not `npm test`): an
 * attack does not hold up the requests beside it. Ratios of medians over alternating rounds, so a
 * machine busy with something else slows both sides alike; still a clock, so run them on a quiet
 * machine. The product suite holds the same attacks to counts: test/abuse.test.ts (refused before
 * execution, in under 1 KB), test/plan.test.ts (selection sets read), test/caller-limits.test.ts
 * (the flood's upstream calls).
 */

const typename = (on: TestGateway) => async () =>
  expect((await post(on, json('{ __typename }'))).body).toEqual({ data: { __typename: 'Query' } });

describe('the abuse corpus, in the default configuration', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it.each(abuseAttacks(() => t).map((attack) => [attack.name, attack] as const))(
    '%s: a { __typename } beside it is not held up',
    async (_, attack) => {
      // Both sides take a millisecond or so, where a GC pause shows: 11 rounds, and a bound that
      // still catches what these attacks did before (an 885 KB answer, a stack overflow).
      expect(await slowdown(typename(t), attack.send, typename(t), 11)).toBeLessThan(10);
    },
  );
});

describe('the fragment fan-out with MAX_REPEATED_FIELDS=1000', () => {
  let roomy: TestGateway;
  beforeAll(async () => {
    roomy = await startTestGateway({ env: { MAX_REPEATED_FIELDS: '1000' } });
  });
  afterAll(() => roomy.close());

  /** Milliseconds until `query` is answered, and until a `{ __typename }` sent right behind it is. */
  async function timed(query: string): Promise<{ own: number; typename: number }> {
    const started = performance.now();
    const [own, typenameAt] = await Promise.all([
      post(roomy, { query }).then((a) => {
        expect(a.body.errors).toBeUndefined();
        return performance.now() - started;
      }),
      typename(roomy)().then(() => performance.now() - started),
    ]);
    return { own, typename: typenameAt };
  }

  it('costs about what a plain document of its length does, and does not hold up a concurrent { __typename }', async () => {
    const length = fanOut().length;
    // Warm both paths (JIT, the steps), then alternate fresh documents (no prepared document to reuse).
    await timed(fanOut());
    await timed(plainOfLength(length));
    const craftedRuns: { own: number; typename: number }[] = [];
    const plainRuns: { own: number; typename: number }[] = [];
    for (let k = 1; k <= 9; k++) {
      craftedRuns.push(await timed(fanOut(k)));
      plainRuns.push(await timed(plainOfLength(length, k)));
    }
    // A fragment walk per path (the old estimate) took seconds: a ratio in the hundreds.
    expect(median(craftedRuns.map((r) => r.own)) / median(plainRuns.map((r) => r.own))).toBeLessThan(10);
    expect(median(craftedRuns.map((r) => r.typename)) / median(plainRuns.map((r) => r.typename))).toBeLessThan(10);
  });
});

describe('RATE_LIMIT_REQUESTS_PER_SECOND=5', () => {
  let t: TestGateway;
  beforeAll(async () => {
    // Callers told apart by address (TRUST_PROXY): a made-up token counts as its address's.
    t = await startTestGateway({ env: { RATE_LIMIT_REQUESTS_PER_SECOND: '5', TRUST_PROXY: 'true' } });
  });
  afterAll(() => t.close());

  it('one caller flooding at its limit costs another no more than the cheapest operation would', async () => {
    const fifty = `{ nodes(ids: ${JSON.stringify(t.reference.store.headIds().slice(0, 50))}) { id } }`;
    // One caller asks 50 upstream calls 40 times at once, every round: at most 10 a window are served.
    const flood = () =>
      Promise.all(Array.from({ length: 40 }, () => post(t, { query: fifty }, { 'x-forwarded-for': '192.0.2.1' })));
    // The same number of the cheapest operations there is, each from a caller of its own (none refused).
    let fresh = 0;
    const address = () => `2001:db8::${(fresh++).toString(16)}`;
    const cheap = () =>
      Promise.all(
        Array.from({ length: 40 }, () => post(t, { query: '{ __typename }' }, { 'x-forwarded-for': address() })),
      );
    const probe = async () =>
      expect(ok(await post(t, { query: '{ heads(first: 1) { totalCount } }' }, { 'x-forwarded-for': address() }))).toBe(
        true,
      );
    await flood();
    // Unlimited, each of the 40 would make 50 calls beside the probe's one.
    expect(await slowdown(probe, flood, cheap)).toBeLessThan(3);
  });
});
