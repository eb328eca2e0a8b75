import { expect } from 'vitest';
import { DEMO_CREDENTIALS } from '../../src/reference-upstream/seed.js';
import { type Answer, post, type TestGateway } from './gateway.js';
import { sampleOf } from './metrics.js';

/** Served: HTTP 200 and no error. */
export const ok = (a: Answer) => a.status === 200 && a.body.errors === undefined;

/** `gateway_refusals_total{limit}` as the gateway's /metrics says it now. */
export const refusals = async (t: TestGateway, limit: string) =>
  sampleOf(
    await (await t.gateway.fetch('http://gateway/metrics')).text(),
    `gateway_refusals_total{limit="${limit}"}`,
  ) ?? 0;

/** A refusal as the issue asks for it: 429, Retry-After in whole seconds, RATE_LIMITED naming the limit, no data. */
export function expectRateLimited(a: Answer, limit: string): void {
  expect(a.status, JSON.stringify(a.body)).toBe(429);
  expect(a.headers.get('retry-after')).toMatch(/^[12]$/);
  expect(a.body.data).toBeUndefined();
  expect(a.body.errors).toEqual([
    expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', limit }) }),
  ]);
}

/**
 * A token the gateway knows to be real: one the reference upstream issued (its demo user's login),
 * read once through the gateway with Get Permissions, whose 2xx teaches the gateway the token. The
 * learning read is itself charged as its address's (`headers` may name one, with TRUST_PROXY).
 */
export async function knownToken(t: TestGateway, headers: Record<string, string> = {}): Promise<string> {
  const token = `Bearer ${t.reference.store.login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)!}`;
  const learnt = await post(
    t,
    { query: '{ permissions(first: 1) { totalCount } }' },
    { ...headers, authorization: token },
  );
  expect(learnt.body.errors, 'the learning read').toBeUndefined();
  return token;
}
