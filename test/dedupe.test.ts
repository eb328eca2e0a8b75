import { afterEach, describe, expect, it } from 'vitest';
import type { OperationName } from '../src/domain/operations.js';
import type { Fault } from '../src/reference-upstream/faults.js';
import { type GraphQLResponse, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { until } from './support/until.js';

/*
 * Identical upstream GETs in flight at once, for one caller (its token, hashed) and one URL,
 * share one call (UPSTREAM_DEDUPE, on by default). The first read is held at the upstream until
 * every request has arrived, so they are in flight together whatever the machine's speed.
 */

const headReads: readonly OperationName[] = ['getHeadExt', 'getHeadById', 'getHeadExtById'];
const held: Fault = { kind: 'latency', ms: 600_000 };
const holdHeadReads = (t: TestGateway, times = 1) => {
  for (const operation of headReads) t.reference.injectFault(operation, held, times);
};
const headQuery = `query($id: ID!) { head(id: $id) { uuid name } }`;
const headCalls = (t: TestGateway) =>
  t.calls().filter((r) => r.operation !== undefined && headReads.includes(r.operation));
const joined = async (t: TestGateway) =>
  sampleOf(await t.metrics.registry.metrics(), 'gateway_upstream_calls_joined_total') ?? 0;

let current: TestGateway | undefined;
const start = async (env: Record<string, string> = {}) => (current = await startTestGateway({ env }));
afterEach(async () => {
  current?.reference.releaseHeld();
  await current?.close();
  current = undefined;
});

/**
 * Reads of one head, each with its `authorization` (none if undefined), all in flight before the
 * upstream answers: `calls` of them held at the upstream, the rest joined to them.
 */
async function readTogether(
  t: TestGateway,
  id: string,
  tokens: readonly (string | undefined)[],
  calls: number,
): Promise<GraphQLResponse[]> {
  const joinsAfter = (await joined(t)) + tokens.length - calls;
  holdHeadReads(t, calls);
  const pending = tokens.map((token) =>
    t.execute(headQuery, { id }, token === undefined ? {} : { authorization: token }),
  );
  await until(async () => (await joined(t)) === joinsAfter && t.reference.inFlight() === calls, 'every read in flight');
  t.reference.releaseHeld();
  return Promise.all(pending);
}

describe('in-flight deduplication (default: on)', () => {
  it('20 identical concurrent reads of one token are 1 upstream call, and all 20 get the answer', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    const responses = await readTogether(t, id, Array(20).fill('Bearer token-a'), 1);
    const name = t.reference.store.findHead(id)!.head.name;
    for (const response of responses) expect(response).toEqual({ data: { head: { uuid: id, name } } });
    expect(headCalls(t)).toHaveLength(1);
    expect(t.attempts).toHaveLength(1);
    expect(await joined(t)).toBe(19);
  });

  it('5 tokens, 4 reads each, are 5 calls: one per token, each sent with its own token; no token shares only with no token', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    const tokens = ['a', 'b', 'c', 'd', 'e'].map((name) => `Bearer token-${name}`);
    const responses = await readTogether(
      t,
      id,
      tokens.flatMap((token) => [token, token, token, token]),
      5,
    );
    for (const response of responses) expect(response.errors).toBeUndefined();
    expect(
      headCalls(t)
        .map((r) => r.headers.authorization)
        .sort(),
    ).toEqual(tokens);

    t.reset();
    const anonymous = await readTogether(t, id, [undefined, undefined, undefined, 'Bearer token-a'], 2);
    for (const response of anonymous) expect(response.errors).toBeUndefined();
    expect(headCalls(t).map((r) => r.headers.authorization)).toEqual(
      expect.arrayContaining([undefined, 'Bearer token-a']),
    );
    expect(headCalls(t)).toHaveLength(2);
  });

  it('the same token written with another scheme case and spacing is the same caller', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    await readTogether(t, id, ['Bearer token-a', 'bearer token-a', '  BEARER   token-a '], 1);
    expect(headCalls(t)).toHaveLength(1);
  });

  it('a header RFC 6750 does not read as the token (a tab for the space) never joins its call, nor it one of its own', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    const headers = ['Bearer token-a', 'Bearer\ttoken-a', 'Bearer token-a', 'Bearer\ttoken-a'];
    for (const response of await readTogether(t, id, headers, 2)) expect(response.errors).toBeUndefined();
    expect(
      headCalls(t)
        .map((r) => r.headers.authorization)
        .sort(),
    ).toEqual(['Bearer\ttoken-a', 'Bearer token-a']);
  });

  it('different heads are different calls', async () => {
    const t = await start();
    const [a, b] = t.reference.store.headIds();
    holdHeadReads(t, 2);
    const pending = [a, b, a, b].map((id) => t.execute(headQuery, { id }));
    await until(async () => (await joined(t)) === 2 && t.reference.inFlight() === 2, 'every read in flight');
    t.reference.releaseHeld();
    for (const response of await Promise.all(pending)) expect(response.errors).toBeUndefined();
    expect(headCalls(t)).toHaveLength(2);
  });

  it('retries are shared too: 10 reads of a head read answering 503, 503, then 200 cost 3 calls', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    for (const operation of headReads) t.reference.injectFault(operation, { kind: 'status', status: 503 }, 2);
    holdHeadReads(t);
    const pending = Array.from({ length: 10 }, () => t.execute(headQuery, { id }));
    await until(
      async () => (await joined(t)) === 9 && t.reference.inFlight() === 1,
      'every read joined, the third attempt held',
    );
    t.reference.releaseHeld();
    for (const response of await Promise.all(pending)) expect(response.errors).toBeUndefined();
    expect(headCalls(t).map((r) => r.status)).toEqual([503, 503, 200]);
  });

  describe('a request that leaves', () => {
    const post = (url: string, id: string, signal?: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer token-a' },
        body: JSON.stringify({ query: headQuery, variables: { id } }),
        signal: signal ?? null,
      });

    it('the first (whose call it is) going away fails neither the call nor the others', async () => {
      const t = await start();
      const url = await t.listen();
      const id = t.reference.store.headIds()[0]!;
      holdHeadReads(t);
      const leaving = new AbortController();
      const first = post(url, id, leaving.signal);
      await until(() => t.reference.inFlight() === 1, 'the first read held');
      const others = [post(url, id), post(url, id)];
      await until(async () => (await joined(t)) === 2, 'the others joined');
      leaving.abort();
      await expect(first).rejects.toThrow();
      // The shared call is still held at the upstream for the two others.
      await until(() => t.attempts.length === 0 && t.reference.inFlight() === 1, 'the call still in flight');
      t.reference.releaseHeld();
      for (const response of await Promise.all(others))
        expect(((await response.json()) as GraphQLResponse).errors).toBeUndefined();
      expect(headCalls(t).map((r) => r.status)).toEqual([200]);
    });

    it('when every request has left, the call is cancelled at the upstream', async () => {
      const t = await start();
      const url = await t.listen();
      const id = t.reference.store.headIds()[0]!;
      holdHeadReads(t);
      const controllers = [new AbortController(), new AbortController()];
      const pending = controllers.map((controller) => post(url, id, controller.signal));
      await until(async () => (await joined(t)) === 1 && t.reference.inFlight() === 1, 'both in flight');
      controllers[0]!.abort();
      await expect(pending[0]).rejects.toThrow();
      expect(t.reference.inFlight()).toBe(1);
      controllers[1]!.abort();
      await expect(pending[1]).rejects.toThrow();
      await until(() => t.reference.inFlight() === 0, 'the shared call cancelled');
      await until(() => t.attempts.length === 1, 'its attempt counted');
      expect(t.attempts[0]!.code).toBe('ABORTED');
      expect(headCalls(t).map((r) => r.status)).toEqual([undefined]);
    });
  });
});

describe('in-flight deduplication and writes', () => {
  it('a read that begins after a write through the gateway never joins a read in flight since before it', async () => {
    const t = await start();
    const id = t.reference.store.headIds()[0]!;
    holdHeadReads(t, 2);
    const before = t.execute(headQuery, { id });
    await until(() => t.reference.inFlight() === 1, 'the first read held at the upstream');
    const written = await t.execute('mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }', {
      i: { id, name: 'written' },
    });
    expect(written.errors).toBeUndefined();
    const after = t.execute(headQuery, { id });
    // Its own call: held beside the first, not joined to it (it would have been read before the write).
    await until(() => t.reference.inFlight() === 2, 'the later read sent on its own');
    expect(await joined(t)).toBe(0);
    t.reference.releaseHeld();
    expect((await after).data).toMatchObject({ head: { name: 'written' } });
    expect((await before).errors).toBeUndefined();
    expect(headCalls(t)).toHaveLength(2);
  });
});

describe('UPSTREAM_DEDUPE=false', () => {
  it('20 identical concurrent reads are 20 calls', async () => {
    const t = await start({ UPSTREAM_DEDUPE: 'false' });
    const id = t.reference.store.headIds()[0]!;
    holdHeadReads(t, 20);
    const pending = Array.from({ length: 20 }, () => t.execute(headQuery, { id }, { authorization: 'Bearer token-a' }));
    await until(() => t.reference.inFlight() === 20, 'every read at the upstream');
    t.reference.releaseHeld();
    for (const response of await Promise.all(pending)) expect(response.errors).toBeUndefined();
    expect(headCalls(t)).toHaveLength(20);
    expect(await joined(t)).toBe(0);
  });
});
