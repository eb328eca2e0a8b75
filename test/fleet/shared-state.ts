import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { FleetGateway } from './fleet.js';

/*
 * What the scenarios with Redis ask of a gateway and of a Redis node: whether a gateway's write
 * of shared state reached a given node (a fresh caller's rate-limit counter), and operations by
 * persisted-query hash.
 */

const jsonHeaders = { 'content-type': 'application/json', accept: 'application/graphql-response+json' };

export interface Answer {
  readonly status: number;
  readonly body: { data?: any; errors?: { message: string; extensions?: Record<string, unknown> }[] };
}

/** A POST of `body` to `endpoint` (a gateway's own /graphql, past HAProxy), with `headers` over the JSON ones. */
export async function post(endpoint: string, body: object, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(endpoint, {
    method: 'POST',
    headers: { ...jsonHeaders, ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

/**
 * A client address of the fleet's tests (IPv6's documentation prefix), told by X-Forwarded-For (the fleet runs with
 * TRUST_PROXY).
 */
export const clientAddress = (n: number): string => `2001:db8::${n.toString(16)}`;

/**
 * Sends `{ __typename }` to `gateway` as a caller never seen before (probe `n`'s client address),
 * and says whether its rate-limit counter (`gw:requests:address:<address>`) is on one of `nodes`
 * right after: the gateway's writes reach them. Needs RATE_LIMIT_REQUESTS_PER_SECOND.
 */
export async function writesReach(gateway: FleetGateway, nodes: readonly Redis[], probe: number): Promise<boolean> {
  const address = clientAddress(probe);
  const answer = await post(gateway.endpoint, { query: '{ __typename }' }, { 'x-forwarded-for': address });
  if (answer.status !== 200)
    throw new Error(`${gateway.name} refused a probe: ${answer.status} ${JSON.stringify(answer.body)}`);
  // The counter's key holds the caller as the limiter names it (traffic/caller-limits.ts).
  const found = await Promise.all(
    nodes.map(async (node) => (await node.scan('0', 'MATCH', `*address:${address}`, 'COUNT', 100_000))[1].length > 0),
  );
  return found.includes(true);
}

/** An APQ request: the hash alone, or with the query to register it. */
export function persisted(query: string, withQuery: boolean): object {
  const sha256Hash = createHash('sha256').update(query).digest('hex');
  return { ...(withQuery ? { query } : {}), extensions: { persistedQuery: { version: 1, sha256Hash } } };
}
