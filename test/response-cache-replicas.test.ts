import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { tokenCallerOf } from '../src/server/callers.js';
import { responseCacheKey } from '../src/server/response-cache/plugin.js';
import { sampleOf } from './support/metrics.js';
import { type GatewayProcess, startGatewayProcess } from './support/process.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { until } from './support/until.js';

/*
 * The response cache with REDIS_URL (issue 25): two gateway processes (src/main.ts, as an
 * operator runs them) share one redis-server and one reference upstream. What one keeps the
 * other serves, to the same caller only; a write through either is never followed by a stale
 * read through the other; with Redis stopped both answer from the upstream, and share again once
 * it is back. (The store's own tests: response-cache-redis.test.ts.)
 */

const TTL_MS = 60_000;
/** A busy machine may take seconds to start a process. */
const PROCESS_TEST = { timeout: 60_000 };

const headName = 'query Name($id: ID!) { head(id: $id) { name } }';
const headCount = '{ heads(first: 1) { totalCount } }';
const updateHead = 'mutation($i: UpdateHeadInput!) { updateHead(input: $i) { head { name } } }';
const deleteHead = 'mutation($i: DeleteHeadInput!) { deleteHead(input: $i) { deletedHeadUuid } }';
const updateSubscription =
  'mutation($i: UpdateSubscriptionInput!) { updateSubscription(input: $i) { subscription { id active } } }';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const globalHeadId = (uuid: string) => Buffer.from(`Head:${uuid}`).toString('base64');

interface Answer {
  status: number;
  headers: Headers;
  body: { data?: any; errors?: unknown[] };
  /** Its key in Redis, had it been kept. */
  key: string;
}

describeWithRedis('the response cache shared through Redis by two gateway processes', PROCESS_TEST, () => {
  let redis: RedisProcess;
  let inspector: Redis;
  let reference: ReferenceUpstream;
  let a: GatewayProcess;
  let b: GatewayProcess;

  beforeAll(async () => {
    redis = await startRedis();
    inspector = new Redis(redis.url);
    // It loses Redis too while the last test stops it.
    inspector.on('error', () => {});
    reference = await startReferenceUpstream();
    const env = {
      UPSTREAM_URL: reference.url,
      REDIS_URL: redis.url,
      RESPONSE_CACHE_TTL_MS: String(TTL_MS),
      LOG_LEVEL: 'warn',
    };
    [a, b] = await Promise.all([startGatewayProcess(env), startGatewayProcess(env)]);
  }, 60_000);
  afterAll(async () => {
    a?.kill();
    b?.kill();
    inspector?.disconnect();
    await reference?.close();
    await redis?.stop();
  });
  beforeEach(() => reference.resetRecording());

  async function post(through: GatewayProcess, body: object, headers: Record<string, string> = {}): Promise<Answer> {
    const response = await fetch(through.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
      body: JSON.stringify(body),
    });
    const { query, variables } = body as { query: string; variables?: unknown };
    // Where Redis keeps its answer: the plugin's key of this query, variables and caller.
    const key = `gw:rc:a:${responseCacheKey(query, undefined, variables, tokenCallerOf(headers.authorization) ?? null)}`;
    return { status: response.status, headers: response.headers, body: (await response.json()) as Answer['body'], key };
  }

  /** A fresh token of `username`, logged in through `through`. */
  async function login(through: GatewayProcess, username: string): Promise<string> {
    const { body } = await post(through, {
      query: 'mutation($i: LoginInput!) { login(input: $i) { accessToken } }',
      variables: { i: { username, password: `${username}-password` } },
    });
    return body.data.login.accessToken as string;
  }

  /** The process stores an answer after sending it: waits until Redis holds it. */
  async function stored(answer: Answer): Promise<void> {
    expect(answer.headers.get('etag')).toMatch(/^W\/"[\w-]{43}"$/);
    await until(async () => (await inspector.exists(answer.key)) === 1, 'the answer stored in Redis');
  }

  /**
   * Posts `body` through `through` until its answer is kept in Redis: an answer read less than the
   * clocks' allowed skew after a write that concerns it is not (CLOCK_SKEW_MS).
   */
  async function keptAnswer(
    through: GatewayProcess,
    body: object,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    let answer: Answer | undefined;
    await until(async () => {
      answer = await post(through, body, headers);
      // The process stores an answer after sending it.
      return (
        (await inspector.exists(answer.key)) === 1 || (await sleep(100).then(() => inspector.exists(answer!.key))) === 1
      );
    }, 'the answer stored in Redis');
    expect(answer!.headers.get('etag')).toMatch(/^W\/"[\w-]{43}"$/);
    return answer!;
  }

  /** Reads `id`'s name through `through` until the answer is kept. */
  const cachedName = async (through: GatewayProcess, id: string, headers: Record<string, string> = {}) =>
    (await keptAnswer(through, { query: headName, variables: { id } }, headers)).body.data.head.name as string;

  const scrape = async (through: GatewayProcess) => (await fetch(new URL('/metrics', through.endpoint))).text();
  const calls = () => reference.requests.length;

  it('an answer kept through one process is a hit through the other for the same token (no upstream call, 304 too), a miss for another token', async () => {
    const id = reference.store.headIds()[0]!;
    const [token, other] = [await login(a, 'demo'), await login(b, 'alice')];
    reference.resetRecording();

    const first = await post(a, { query: headName, variables: { id } }, bearer(token));
    expect(first.body).toEqual({ data: { head: { name: reference.store.findHead(id)!.head.name } } });
    expect(calls()).toBe(1);
    await stored(first);

    const hit = await post(b, { query: headName, variables: { id } }, bearer(token));
    expect(hit.body).toEqual(first.body);
    expect(hit.headers.get('etag')).toBe(first.headers.get('etag'));
    expect(hit.headers.get('cache-control')).toMatch(/^private, max-age=(59|60)$/);
    expect(calls()).toBe(1);

    // The same operation as a GET: the same key, so a hit, and the hit's tag is the client's.
    const url = `${b.endpoint}?query=${encodeURIComponent(headName)}&variables=${encodeURIComponent(JSON.stringify({ id }))}`;
    const revalidated = await fetch(url, {
      headers: { ...bearer(token), 'if-none-match': first.headers.get('etag')! },
    });
    expect(revalidated.status).toBe(304);
    expect(await revalidated.text()).toBe('');
    expect(calls()).toBe(1);

    const otherCaller = await post(b, { query: headName, variables: { id } }, bearer(other));
    expect(otherCaller.body).toEqual(first.body);
    // Kept apart (its own key), though the data, and so the tag, are the same.
    expect(otherCaller.key).not.toBe(first.key);
    expect(calls()).toBe(2);
    const metrics = await scrape(b);
    expect(sampleOf(metrics, 'gateway_response_cache_lookups_total{result="hit"}')).toBeGreaterThanOrEqual(2);
    // The entries and bytes gauges are the store in memory's: with Redis they are not reported (a 0 would mislead).
    expect(metrics).not.toContain('gateway_response_cache_entries');
  });

  it('a write through either process is never followed by a stale read through the other: updateHead, deleteHead, updateSubscription', async () => {
    const token = await login(a, 'demo');
    const ids = reference.store.headIds().slice(1, 7);
    for (const [round, id] of ids.entries()) {
      const [writer, reader] = round % 2 === 0 ? [a, b] : [b, a];
      // Kept by the reader (a name, a listing's count) and by the writer.
      await cachedName(reader, id, bearer(token));
      await cachedName(writer, id);
      const count = await keptAnswer(reader, { query: headCount });

      const written = await post(
        writer,
        { query: updateHead, variables: { i: { id, name: `round ${round}` } } },
        bearer(token),
      );
      expect(written.body).toEqual({ data: { updateHead: { head: { name: `round ${round}` } } } });
      expect((await post(reader, { query: headName, variables: { id } }, bearer(token))).body.data).toEqual({
        head: { name: `round ${round}` },
      });
      expect((await post(reader, { query: headName, variables: { id } })).body.data).toEqual({
        head: { name: `round ${round}` },
      });

      // Kept again, then deleted through the writer: gone at the reader, and counted out of the listing.
      await cachedName(reader, id, bearer(token));
      const deleted = await post(
        writer,
        { query: deleteHead, variables: { i: { id: globalHeadId(id) } } },
        bearer(token),
      );
      expect(deleted.body).toEqual({ data: { deleteHead: { deletedHeadUuid: id } } });
      expect((await post(reader, { query: headName, variables: { id } }, bearer(token))).body.data).toEqual({
        head: null,
      });
      expect((await post(reader, { query: headCount })).body.data).toEqual({
        heads: { totalCount: count.body.data.heads.totalCount - 1 },
      });

      // No query reads a subscription: its eviction reaches the shared store, and evicts nothing else.
      const kept = reference.store.headIds()[0]!;
      await cachedName(reader, kept, bearer(token));
      const subscription = await post(
        writer,
        { query: updateSubscription, variables: { i: { active: round % 2 === 0 } } },
        bearer(token),
      );
      expect(subscription.body.errors).toBeUndefined();
      const subscriptionId = subscription.body.data.updateSubscription.subscription.id as string;
      expect(await inspector.exists(`gw:rc:{OrganizationSubscription:${subscriptionId}}:v`)).toBe(1);
      const before = calls();
      await post(reader, { query: headName, variables: { id: kept } }, bearer(token));
      expect(calls()).toBe(before);
    }
  });

  it('no answer of one token is served to another: many tokens of several users, each with data of its own, through both processes', async () => {
    const id = reference.store.headIds()[7]!;
    const tokens: string[] = [];
    for (const user of ['demo', 'alice', 'viewer'])
      for (let i = 0; i < 3; i++) tokens.push(await login(tokens.length % 2 ? a : b, user));
    reference.resetRecording();
    // The head changes under the gateways (not through them: nothing is evicted) before each
    // caller reads it, so each caller's kept answer differs from every other's.
    for (const [i, token] of tokens.entries()) {
      reference.store.updateHead(id, { name: `tenant ${i}` });
      expect(await cachedName(i % 2 ? a : b, id, bearer(token))).toBe(`tenant ${i}`);
    }
    reference.store.updateHead(id, { name: 'public' });
    expect(await cachedName(a, id)).toBe('public');
    expect(calls()).toBe(tokens.length + 1);

    reference.store.updateHead(id, { name: 'changed after every read' });
    // Each caller through the process it did not read through, all at once.
    const again = await Promise.all(
      tokens.map((token, i) => post(i % 2 ? b : a, { query: headName, variables: { id } }, bearer(token))),
    );
    expect(again.map((answer) => answer.body.data.head.name)).toEqual(tokens.map((_, i) => `tenant ${i}`));
    expect((await post(b, { query: headName, variables: { id } })).body.data).toEqual({ head: { name: 'public' } });
    expect(calls()).toBe(tokens.length + 1);
  });

  it('fails open while Redis is stopped (answers from the upstream, no error, fallbacks counted), and shares again once it is back', async () => {
    const id = reference.store.headIds()[8]!;
    const token = await login(a, 'demo');
    const name = await cachedName(a, id, bearer(token));
    const fallbacks = async (through: GatewayProcess) =>
      sampleOf(
        await scrape(through),
        'gateway_shared_state_fallbacks_total{store="response_cache",reason="unreachable"}',
      ) ?? 0;
    const before = await Promise.all([fallbacks(a), fallbacks(b)]);
    await redis.stop();
    reference.resetRecording();

    for (const through of [a, b, a, b]) {
      const answer = await post(through, { query: headName, variables: { id } }, bearer(token));
      expect({ status: answer.status, body: answer.body }).toEqual({ status: 200, body: { data: { head: { name } } } });
    }
    // Each a miss: one upstream call each.
    expect(calls()).toBe(4);
    // A write while Redis is down is answered (its eviction is lost with Redis), and read fresh.
    const written = await post(
      a,
      { query: updateHead, variables: { i: { id, name: 'written while Redis was down' } } },
      bearer(token),
    );
    expect(written.body).toEqual({ data: { updateHead: { head: { name: 'written while Redis was down' } } } });
    expect((await post(b, { query: headName, variables: { id } }, bearer(token))).body).toEqual({
      data: { head: { name: 'written while Redis was down' } },
    });
    const after = await Promise.all([fallbacks(a), fallbacks(b)]);
    expect(after[0]).toBeGreaterThanOrEqual(before[0]! + 3);
    expect(after[1]).toBeGreaterThanOrEqual(before[1]! + 3);
    expect(
      sampleOf(await scrape(a), 'gateway_response_cache_failures_total{call="invalidate"}'),
    ).toBeGreaterThanOrEqual(1);

    await redis.start();
    // Once both have reconnected, what one keeps the other serves again.
    for (const [keeper, server] of [
      [a, b],
      [b, a],
    ] as const) {
      const query = { query: headName, variables: { id: reference.store.headIds()[keeper === a ? 9 : 10] } };
      let kept: Answer | undefined;
      await until(async () => {
        kept = await post(keeper, query, bearer(token));
        return (await inspector.exists(kept.key)) === 1;
      }, 'an answer kept in Redis again');
      // The other may still be waiting out its reconnection's backoff (up to 2 s): a hit once it is back.
      await until(async () => {
        reference.resetRecording();
        const served = await post(server, query, bearer(token));
        expect(served.body).toEqual(kept!.body);
        return calls() === 0;
      }, 'the answer served by the other process without an upstream call');
    }
  });
});
