import { expect } from 'vitest';
import type { Answer, TestGateway } from './gateway.js';
import { sampleOf } from './metrics.js';

/** Served: HTTP 200 and no error. */
export const ok = (a: Answer) => a.status === 200 && a.body.errors === undefined;

/** `gateway_refusals_total{limit}` as the gateway's /metrics says it now. */
export const refusals = async (t: TestGateway, limit: string) => sampleOf(await (await t.gateway.fetch('http://gateway/metrics')).text(), `gateway_refusals_total{limit="${limit}"}`) ?? 0;

/** A refusal as the issue asks for it: 429, Retry-After in whole seconds, RATE_LIMITED naming the limit, no data. */
export function expectRateLimited(a: Answer, limit: string): void {
  expect(a.status, JSON.stringify(a.body)).toBe(429);
  expect(a.headers.get('retry-after')).toMatch(/^[12]$/);
  expect(a.body.data).toBeUndefined();
  expect(a.body.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: 'RATE_LIMITED', limit }) })]);
}
