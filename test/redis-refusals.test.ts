import { createHash } from 'node:crypto';
import { Redis, ReplyError } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { until } from './support/until.js';

/*
 * A Redis that answers but refuses writes (REDIS_URL): full under `maxmemory` with
 * `noeviction`, or a read-only replica. The limits fall back to counting per process and APQ
 * registrations to process memory; no request is refused or lost for it; each fallback counts in
 * gateway_shared_state_fallbacks_total{store,reason} and one warning line says why.
 */

const query = '{ heads(first: 1) { totalCount } }';
const hash = createHash('sha256').update(query).digest('hex');
// Callers told apart by address (TRUST_PROXY): a token is a caller of its own only once known to be real.
const limits = { RATE_LIMIT_REQUESTS_PER_SECOND: '5', RATE_LIMIT_IN_FLIGHT: '100', TRUST_PROXY: 'true' };

/**
 * What one caller (a client address) gets for 15 operations in a row (a burst of 10 under the limit
 * above), and APQ by hash after registering. A round's caller is one of its own: a caller refused a
 * moment ago is refused again at once, without asking the limiter.
 */
async function drive(t: TestGateway, caller = '192.0.2.1') {
  const statuses: number[] = [];
  for (let i = 0; i < 15; i++)
    statuses.push((await post(t, { query: '{ __typename }' }, { 'x-forwarded-for': caller })).status);
  const registered = await post(t, { query, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
  const byHash = await post(t, { extensions: { persistedQuery: { version: 1, sha256Hash: hash } } });
  return { statuses, registered, byHash };
}

const fallbacks = async (t: TestGateway, store: string, reason: string) =>
  sampleOf(
    await t.metrics.registry.metrics(),
    `gateway_shared_state_fallbacks_total{store="${store}",reason="${reason}"}`,
  ) ?? 0;
const warnings = (t: TestGateway) => t.logLines.filter((line) => line.includes('"level":40') && line.includes('Redis'));

describeWithRedis.each([
  ['full (maxmemory 2mb, noeviction)', 'out_of_memory', 'Redis refuses writes (maxmemory reached)'],
  ['a read-only replica', 'read_only', 'Redis refuses writes (a read-only replica)'],
])('Redis %s', (_name, reason, warning) => {
  const servers: RedisProcess[] = [];
  let t: TestGateway;
  let client: Redis;

  beforeAll(async () => {
    if (reason === 'out_of_memory') {
      servers.push(await startRedis({ args: ['--maxmemory', '2mb', '--maxmemory-policy', 'noeviction'] }));
    } else {
      servers.push(await startRedis());
      servers.push(await startRedis({ args: ['--replicaof', '127.0.0.1', String(servers[0]!.port)] }));
    }
    const redis = servers.at(-1)!;
    client = new Redis(redis.url);
    t = await startTestGateway({ env: { REDIS_URL: redis.url, ...limits } });
    if (reason === 'out_of_memory') {
      // Filled with keys that never expire, until Redis refuses the next.
      for (let i = 0; ; i++) {
        const refused = await client.set(`fill:${i}`, 'x'.repeat(10_000)).then(
          () => undefined,
          (error: unknown) => error,
        );
        if (refused !== undefined) {
          expect(refused).toBeInstanceOf(ReplyError);
          expect(String(refused)).toMatch(/^ReplyError: OOM/);
          break;
        }
      }
    }
  });
  afterAll(async () => {
    client?.disconnect();
    await t?.close();
    for (const server of servers) await server.stop();
  });

  it('serves every request: the limits count per process, APQ registers in process memory; counted by reason, one warning', async () => {
    const before = await client.dbsize();
    const { statuses, registered, byHash } = await drive(t);
    // The burst of 10 holds in this process, with nothing written to Redis.
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(200));
    expect(statuses.slice(10)).toEqual(Array(5).fill(429));
    expect(registered.body.data).toEqual({ heads: { totalCount: expect.any(Number) } });
    expect(byHash.body.errors).toBeUndefined();
    expect(byHash.body.data).toEqual(registered.body.data);
    expect(await client.dbsize()).toBe(before);

    if (reason === 'read_only') {
      // A node answering READONLY is connected to again (at most every 10 s: a managed endpoint's
      // name may lead to the new primary now); what comes while it reconnects is not sent.
      expect(await fallbacks(t, 'limits', reason)).toBeGreaterThanOrEqual(1);
      expect(
        (await fallbacks(t, 'limits', reason)) + (await fallbacks(t, 'limits', 'unreachable')),
      ).toBeGreaterThanOrEqual(15);
      expect((await fallbacks(t, 'apq', reason)) + (await fallbacks(t, 'apq', 'unreachable'))).toBe(1);
    } else {
      expect(await fallbacks(t, 'limits', reason)).toBeGreaterThanOrEqual(15);
      expect(await fallbacks(t, 'apq', reason)).toBe(1);
      expect(await fallbacks(t, 'limits', 'unreachable')).toBe(0);
    }
    const lines = warnings(t);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(warning);
    expect(JSON.parse(lines[0]!)).toMatchObject({ reason });
    for (const server of servers) expect(lines[0]).not.toContain(String(server.port));

    // Another round within the minute (and, once reconnected, within the 10 s a read-only node
    // is not reconnected to again): counted again, by its reason, no second line.
    await until(() => t.redis!.ready(), 'Redis used again');
    const counted = await fallbacks(t, 'limits', reason);
    await drive(t, '192.0.2.2');
    expect(await fallbacks(t, 'limits', reason)).toBeGreaterThanOrEqual(counted + 15);
    expect(warnings(t)).toHaveLength(1);
  });
});

/*
 * The response cache in a Redis of its own (RESPONSE_CACHE_REDIS_URL): answers there, limit
 * counters and APQ in REDIS_URL's. The hardening issue's attack filled one Redis with answers
 * until the limiters' writes were refused and a victim was let through twice its limit; with the
 * cache's own Redis full, the limits hold.
 */
describeWithRedis("RESPONSE_CACHE_REDIS_URL: the response cache's own Redis, full", () => {
  let limitsRedis: RedisProcess;
  let cacheRedis: RedisProcess;
  let t: TestGateway;
  let inLimits: Redis;
  let inCache: Redis;

  beforeAll(async () => {
    limitsRedis = await startRedis();
    cacheRedis = await startRedis({ args: ['--maxmemory', '2mb', '--maxmemory-policy', 'noeviction'] });
    [inLimits, inCache] = [new Redis(limitsRedis.url), new Redis(cacheRedis.url)];
    t = await startTestGateway({
      env: {
        REDIS_URL: limitsRedis.url,
        RESPONSE_CACHE_REDIS_URL: cacheRedis.url,
        RESPONSE_CACHE_TTL_MS: '60000',
        ...limits,
      },
    });
  });
  afterAll(async () => {
    inLimits.disconnect();
    inCache.disconnect();
    await t.close();
    await Promise.all([limitsRedis.stop(), cacheRedis.stop()]);
  });

  it('keeps answers in its own Redis, none in REDIS_URL; once that Redis is full, the limits in REDIS_URL still hold: 10 of 15', async () => {
    for (let i = 0; i < 2; i++) expect((await post(t, { query })).status).toBe(200);
    await until(async () => (await inCache.keys('gw:rc:*')).length > 0, 'an answer kept in the cache’s Redis');
    expect(await inLimits.keys('gw:rc:*')).toEqual([]);
    // The cache's Redis filled until it refuses the next write, as made-up tokens and large answers would.
    for (let i = 0; ; i++) {
      const refused = await inCache.set(`fill:${i}`, 'x'.repeat(10_000)).then(
        () => undefined,
        (error: unknown) => error,
      );
      if (refused !== undefined) break;
    }
    const { statuses } = await drive(t);
    expect(statuses.filter((status) => status === 200)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(5);
    expect((await inLimits.keys('gw:requests:*')).length).toBeGreaterThan(0);
    expect(await fallbacks(t, 'limits', 'out_of_memory')).toBe(0);
  });
});

/*
 * The response cache in the Redis of the limits (REDIS_URL alone), under the hardening issue's
 * attack: made-up tokens, each a cache scope of its own, asking for large answers. Its byte budget
 * (RESPONSE_CACHE_MAX_BYTES, charged in Redis) keeps the answers within it, so the limiters'
 * writes are never refused for memory and a victim's limit holds.
 */
describeWithRedis('RESPONSE_CACHE_MAX_BYTES: the response cache within its budget in the Redis of the limits', () => {
  const budget = 2 * 1024 * 1024;
  let redis: RedisProcess;
  let t: TestGateway;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedis({ args: ['--maxmemory', '8mb', '--maxmemory-policy', 'noeviction'] });
    client = new Redis(redis.url);
    t = await startTestGateway({
      env: {
        REDIS_URL: redis.url,
        RESPONSE_CACHE_TTL_MS: '60000',
        RESPONSE_CACHE_MAX_BYTES: String(budget),
        ...limits,
      },
    });
  });
  afterAll(async () => {
    client.disconnect();
    await t.close();
    await redis.stop();
  });

  it('made-up tokens with large answers add no more than the budget to Redis: the limits hold, 10 of 15', async () => {
    const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await client.info('memory'))![1]);
    const before = await usedMemory();
    const page = '{ heads(first: 100) { nodes { id uuid name url arUrl outputFormat style version } } }';
    let bytes = 0;
    for (let round = 0; round < 30; round++) {
      // Ten made-up tokens a round, each round from an address of its own: within its limits (a burst of 10).
      const answers = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          post(
            t,
            { query: page },
            { authorization: `Bearer made-up-${round}-${i}`, 'x-forwarded-for': `198.51.100.${round + 1}` },
          ),
        ),
      );
      for (const { status, body } of answers) {
        expect(status).toBe(200);
        bytes += JSON.stringify(body).length;
      }
    }
    // Without the budget these answers (each kept for its own token) would take more than Redis's 8 MB.
    expect(bytes).toBeGreaterThan(8 * 1024 * 1024);
    // Refused for the budget, or (ten answers from one address) for their address's share of it first.
    const overBudget = async (bound: string) =>
      sampleOf(await t.metrics.registry.metrics(), `gateway_response_cache_over_budget_total{bound="${bound}"}`) ?? 0;
    expect((await overBudget('total')) + (await overBudget('caller'))).toBeGreaterThan(250);
    expect(await overBudget('caller')).toBeGreaterThan(0);
    expect(await usedMemory()).toBeLessThan(before + budget);
    const { statuses } = await drive(t);
    expect(statuses.filter((status) => status === 200)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(5);
    expect(await fallbacks(t, 'limits', 'out_of_memory')).toBe(0);
    expect(await fallbacks(t, 'response_cache', 'out_of_memory')).toBe(0);
  });
});
