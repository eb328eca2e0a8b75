import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { tokenCallerOf } from '../src/server/callers.js';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import type { SharedRedis } from '../src/server/shared-state/shared-redis.js';
import { createCallerLimiters, take, waitOf } from '../src/server/traffic/limiters.js';
import { jsonHeaders, startTestGateway, type TestGateway } from './support/gateway.js';
import { sampleOf } from './support/metrics.js';
import { type GatewayProcess, startGatewayProcess } from './support/process.js';
import { connectRedis, type RedisProcess, startRedis } from './support/redis.js';
import { describeWithRedis } from './support/services.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { until } from './support/until.js';

/*
 * REDIS_URL against a real redis-server (Debian's package) on a free loopback port: two gateway
 * processes enforce one limit per caller and share APQ registrations; Redis stopping mid-run
 * costs no request, and the gateway uses it again once it is back.
 */

let redis: RedisProcess;
describeWithRedis('state shared through Redis', () => {
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis?.stop());

  const apqQuery = '{ heads(first: 1) { totalCount } }';
  const apqHash = createHash('sha256').update(apqQuery).digest('hex');
  const persisted = (withQuery: boolean) => ({
    ...(withQuery ? { query: apqQuery } : {}),
    extensions: { persistedQuery: { version: 1, sha256Hash: apqHash } },
  });

  /** Waits until `listeners` processes listen for learnt tokens (each subscribes as its Redis connection is ready). */
  async function tokensHeardBy(listeners: number): Promise<void> {
    const check = new Redis(redis.url);
    try {
      await until(
        async () => Number(((await check.pubsub('NUMSUB', 'gw:known:learnt')) as [string, number])[1]) >= listeners,
        `${listeners} processes listening for learnt tokens`,
      );
    } finally {
      check.disconnect();
    }
  }

  async function postTo(
    endpoint: string,
    body: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: any }> {
    const response = await request(endpoint, {
      method: 'POST',
      headers: { ...jsonHeaders(), ...headers },
      body: JSON.stringify(body),
    });
    return { status: response.statusCode, body: await response.body.json() };
  }

  describeWithRedis('two gateway processes on one Redis', () => {
    let reference: ReferenceUpstream;
    const endpoints: string[] = [];
    const gateways: GatewayProcess[] = [];

    beforeAll(async () => {
      reference = await startReferenceUpstream();
      const env = {
        UPSTREAM_URL: reference.url,
        REDIS_URL: redis.url,
        RATE_LIMIT_REQUESTS_PER_SECOND: '3',
        LOG_LEVEL: 'warn',
      };
      const started = await Promise.allSettled([startGatewayProcess(env), startGatewayProcess(env)]);
      for (const result of started) if (result.status === 'fulfilled') gateways.push(result.value);
      for (const result of started) if (result.status === 'rejected') throw result.reason;
      endpoints.push(...gateways.map((g) => g.endpoint));
    });
    afterAll(async () => {
      // Every gateway process goes with the test, whatever happened (SIGINT: they stop in order, at once).
      await Promise.all(
        gateways.map(async (gateway) => {
          if (gateway.child.exitCode === null && gateway.child.signalCode === null) gateway.child.kill('SIGINT');
          await gateway.exited;
        }),
      );
      await reference?.close();
    });

    it('enforce one limit per caller: 6 operations at the first use up the window, the second refuses the 7th', async () => {
      // A token the upstream issued, learnt by the first process from a read it accepted (which counts
      // as the address's) and told to the second through Redis: a caller of its own at both.
      const token = reference.store.login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)!;
      const caller = { authorization: `Bearer ${token}` };
      const known = async (endpoint: string) =>
        sampleOf(await (await fetch(endpoint.replace(/\/graphql$/, '/metrics'))).text(), 'gateway_known_tokens') ?? 0;
      await tokensHeardBy(2);
      const before = await known(endpoints[1]!);
      expect(
        (await postTo(endpoints[0]!, { query: '{ permissions(first: 1) { totalCount } }' }, caller)).body.errors,
      ).toBeUndefined();
      await until(async () => (await known(endpoints[1]!)) > before, 'the second process told of the token');
      const first = await Promise.all(
        Array.from({ length: 6 }, () => postTo(endpoints[0]!, { query: '{ __typename }' }, caller)),
      );
      expect(first.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
      const second = await postTo(endpoints[1]!, { query: '{ __typename }' }, caller);
      expect(second.status).toBe(429);
      expect(second.body.errors[0].extensions).toMatchObject({ code: 'RATE_LIMITED', limit: 'requests' });
      // Another caller (the address, with no token or a made-up one), on either process, has a window of its own.
      expect(
        (await postTo(endpoints[1]!, { query: '{ __typename }' }, { authorization: 'Bearer someone-else' })).status,
      ).toBe(200);
      expect((await postTo(endpoints[0]!, { query: '{ __typename }' })).status).toBe(200);

      // Redis holds a digest of the token, never the token.
      const client = new Redis(redis.url);
      try {
        const keys = await client.keys('*');
        expect(keys.some((key) => key.startsWith('gw:requests:token:'))).toBe(true);
        expect(keys.join('\n')).not.toContain(token);
      } finally {
        client.disconnect();
      }
    });

    it('share one APQ registration: registered at one, run by hash alone at the other', async () => {
      const unknown = await postTo(endpoints[1]!, persisted(false));
      expect(unknown.body.errors[0].extensions.code).toBe('PERSISTED_QUERY_NOT_FOUND');
      expect((await postTo(endpoints[0]!, persisted(true))).body.data.heads.totalCount).toBeGreaterThan(0);
      reference.resetRecording();
      const byHash = await postTo(endpoints[1]!, persisted(false));
      expect(byHash.body.errors).toBeUndefined();
      expect(byHash.body.data.heads.totalCount).toBeGreaterThan(0);
      expect(reference.requests).toHaveLength(1);
    });
  });

  describeWithRedis('a token known to be real, across replicas on one Redis', () => {
    const replicas: TestGateway[] = [];
    beforeAll(async () => {
      const env = { REDIS_URL: redis.url, RATE_LIMIT_REQUESTS_PER_SECOND: '3', TRUST_PROXY: 'true' };
      const first = await startTestGateway({ env });
      replicas.push(first, await startTestGateway({ env, reference: first.reference }));
    });
    afterAll(async () => {
      // The second shares the first's upstream: closed first.
      for (const replica of [...replicas].reverse()) await replica.close();
    });

    it("is learnt at one replica and known at every other: its operations there count as its own, not its address's", async () => {
      const [a, b] = replicas as [TestGateway, TestGateway];
      const authorization = `Bearer ${a.reference.store.login(DEMO_CREDENTIALS.username, DEMO_CREDENTIALS.password)!}`;
      const caller = tokenCallerOf(authorization)!;
      expect(b.knownTokens.callerOf(caller)).toBeUndefined();
      await tokensHeardBy(2);
      // Accepted by Get Permissions at the first replica (from an address of its own, whose window that read uses).
      const learnt = await a.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: { ...jsonHeaders(), authorization, 'x-forwarded-for': '192.0.2.80' },
        body: JSON.stringify({ query: '{ permissions(first: 1) { totalCount } }' }),
      });
      expect(((await learnt.json()) as { errors?: unknown }).errors).toBeUndefined();
      await until(() => b.knownTokens.callerOf(caller) === caller, 'the second replica told of the token');
      // At the second, from an office's address: its whole burst (6) is the token's, and the address's window is
      // untouched.
      const from = (headers: Record<string, string>) =>
        b.gateway.fetch('http://gateway/graphql', {
          method: 'POST',
          headers: { ...jsonHeaders(), 'x-forwarded-for': '192.0.2.81', ...headers },
          body: JSON.stringify({ query: '{ __typename }' }),
        });
      const statuses = await Promise.all(Array.from({ length: 6 }, async () => (await from({ authorization })).status));
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
      expect((await from({})).status).toBe(200);
      expect((await from({ authorization })).status).toBe(429);
      // Only its hash travelled, and Redis keeps its hash alone: never the token.
      const check = new Redis(redis.url);
      try {
        expect((await check.keys('*')).join('\n')).not.toContain(authorization.slice('Bearer '.length));
        expect((await check.zrange('gw:known', 0, -1)).join('\n')).not.toContain(authorization.slice('Bearer '.length));
      } finally {
        check.disconnect();
      }
    });
  });

  describeWithRedis('a rate limit beside an in-flight limit in Redis', () => {
    let t: TestGateway;
    beforeAll(async () => {
      t = await startTestGateway({
        env: {
          REDIS_URL: redis.url,
          RATE_LIMIT_REQUESTS_PER_SECOND: '3',
          RATE_LIMIT_IN_FLIGHT: '10',
          TRUST_PROXY: 'true',
        },
      });
    });
    afterAll(() => t?.close());

    it('keeps its own window: it expires two seconds after the first operation, not after the last', async () => {
      const send = () =>
        t.gateway.fetch('http://gateway/graphql', {
          method: 'POST',
          headers: { ...jsonHeaders(), 'x-forwarded-for': '192.0.2.70' },
          body: JSON.stringify({ query: '{ __typename }' }),
        });
      const check = new Redis(redis.url);
      try {
        // The caller's key: its address (a caller without a token known to be real).
        const key = 'gw:requests:address:192.0.2.70';
        // When the window ends, in Redis's own clock (ms since the epoch).
        const windowEnd = async () => Number(await check.call('PEXPIRETIME', key));
        const redisNow = async () => {
          const [seconds, micros] = await check.time();
          return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
        };
        expect((await send()).status).toBe(200);
        const end = await windowEnd();
        // The second operation comes at a later millisecond than the first, whose window began at end − 2 s.
        await until(async () => (await redisNow()) > end - 2_000, 'a millisecond past the window start');
        expect((await send()).status).toBe(200);
        // The in-flight script restarted the window with every operation: a steady caller was refused for good.
        expect(await windowEnd()).toBe(end);
        expect(await check.get(key)).toBe('2');
      } finally {
        check.disconnect();
      }
    });
  });

  describeWithRedis('Redis stopping mid-run', () => {
    let t: TestGateway;
    let shared: SharedRedis;
    let lines: string[];

    beforeAll(async () => {
      t = await startTestGateway({
        env: {
          REDIS_URL: redis.url,
          RATE_LIMIT_REQUESTS_PER_SECOND: '100000',
          RATE_LIMIT_IN_FLIGHT: '1000',
          RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: '100000',
          TRUST_PROXY: 'true',
        },
      });
      shared = t.redis!;
      lines = t.logLines;
      expect(shared.ready()).toBe(true);
    });
    afterAll(() => t?.close());

    const fallbacks = async (store: string) =>
      sampleOf(
        await t.metrics.registry.metrics(),
        `gateway_shared_state_fallbacks_total{store="${store}",reason="unreachable"}`,
      ) ?? 0;
    /** One operation of a caller: a client address (TRUST_PROXY). */
    const run = async (caller: string) => {
      const response = await t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: { ...jsonHeaders(), 'x-forwarded-for': caller },
        body: JSON.stringify({ query: '{ heads(first: 1) { totalCount } }' }),
      });
      return { status: response.status, body: (await response.json()) as any };
    };

    it('loses no request: four clients keep going while it stops; limits fail open with one warning and a metric; it is used again once back', async () => {
      const answers: { status: number; body: any }[] = [];
      let stopped = false;
      const client = async (id: number) => {
        for (let i = 0; i < 30; i++) {
          answers.push(await run(`192.0.2.${id + 1}`));
          // Redis goes away (SIGKILL) while every client is mid-run.
          if (id === 0 && i === 10) {
            await redis.stop();
            stopped = true;
          }
        }
      };
      await Promise.all([0, 1, 2, 3].map(client));
      expect(stopped).toBe(true);
      expect(answers).toHaveLength(120);
      for (const a of answers) {
        expect(a.status, JSON.stringify(a.body)).toBe(200);
        expect(a.body.errors).toBeUndefined();
      }
      expect(await fallbacks('limits')).toBeGreaterThan(0);
      const warnings = lines.filter((line) => line.includes('"level":40') && line.includes('Redis unreachable'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).not.toContain(String(redis.port));

      // APQ while it is down: registered in process memory, run by hash.
      const register = await t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: jsonHeaders(),
        body: JSON.stringify(persisted(true)),
      });
      expect(((await register.json()) as any).data.heads.totalCount).toBeGreaterThan(0);
      const byHash = await t.gateway.fetch('http://gateway/graphql', {
        method: 'POST',
        headers: jsonHeaders(),
        body: JSON.stringify(persisted(false)),
      });
      expect(((await byHash.json()) as any).errors).toBeUndefined();
      expect(await fallbacks('apq')).toBeGreaterThan(0);

      // Back on the same port (empty): the gateway reconnects and counts there again.
      await redis.start();
      expect(await shared.whenReady(10_000)).toBe(true);
      const before = await fallbacks('limits');
      expect((await run('192.0.2.99')).status).toBe(200);
      expect(await fallbacks('limits')).toBe(before);
      const check = new Redis(redis.url);
      try {
        expect(await check.keys('gw:requests:*')).toEqual(['gw:requests:address:192.0.2.99']);
      } finally {
        check.disconnect();
      }
      expect(lines.some((line) => line.includes('Redis reachable again'))).toBe(true);
    });
  });

  describeWithRedis(
    'a Redis that stops answering on a live connection (a Cluster master gone, a blocked server)',
    () => {
      let shared: SharedRedis;
      const metrics = new GatewayMetrics({ defaultMetrics: false });

      beforeAll(async () => {
        shared = await connectRedis(redis.url, metrics);
      });
      afterAll(() => shared?.close());

      it('costs one command timeout, not one per request: Redis is left alone for a second after it, the limits counting in process memory', async () => {
        const limiter = createCallerLimiters(
          {
            requestsPerSecond: 1_000,
            upstreamCallsPerSecond: undefined,
            inFlight: undefined,
            addressRequestsPerSecond: undefined,
            windowSeconds: 2,
            trustProxy: false,
          },
          { redis: shared, inFlightTtlSeconds: 30 },
        ).requests!;
        const blocker = new Redis(redis.url);
        try {
          // Redis holds every command for 1.5 s: the connection stays up, commands get no answer.
          await blocker.call('CLIENT', 'PAUSE', '1500', 'ALL');
          await until(
            async () => (await take(limiter, 'token:first', 1)) !== undefined && !shared.ready(),
            'a command timed out',
          );
          // Ten more callers meanwhile: each counted at once in process memory, none sent.
          for (let i = 0; i < 10; i++) expect(waitOf(limiter, await take(limiter, `token:${i}`, 1))).toBeUndefined();
          expect(shared.ready()).toBe(false);
          await until(() => shared.ready(), 'Redis used again', 5_000);
          // The command that timed out ran once the pause ended; none of the ten was sent.
          await until(async () => (await blocker.exists('gw:requests:token:first')) === 1, 'the first count in Redis');
          expect(await blocker.exists(...Array.from({ length: 10 }, (_, i) => `gw:requests:token:${i}`))).toBe(0);
          expect(
            sampleOf(
              await metrics.registry.metrics(),
              'gateway_shared_state_fallbacks_total{store="limits",reason="unreachable"}',
            ),
          ).toBe(11);
        } finally {
          blocker.disconnect();
        }
      });
    },
  );

  describeWithRedis(
    'REDIS_URL=redis://… naming a node that a failover demotes (a managed endpoint behind one name)',
    () => {
      let replacement: RedisProcess;
      let proxy: TcpProxy;
      let shared: SharedRedis;
      const metrics = new GatewayMetrics({ defaultMetrics: false });

      beforeAll(async () => {
        replacement = await startRedis();
        proxy = await startTcpProxy({ host: '127.0.0.1', port: redis.port });
        shared = await connectRedis(`redis://127.0.0.1:${proxy.port}`, metrics);
      });
      afterAll(async () => {
        await shared?.close();
        await proxy?.close();
        await replacement?.stop();
        // The node this file shares is a master again for the tests after this one.
        const node = new Redis(redis.url);
        await node.call('REPLICAOF', 'NO', 'ONE').finally(() => node.disconnect());
      });

      it('makes its connection again when the node answers READONLY, and counts where the name now leads', async () => {
        const limiter = createCallerLimiters(
          {
            requestsPerSecond: 1_000,
            upstreamCallsPerSecond: undefined,
            inFlight: undefined,
            addressRequestsPerSecond: undefined,
            windowSeconds: 2,
            trustProxy: false,
          },
          { redis: shared, inFlightTtlSeconds: 30 },
        ).requests!;
        await take(limiter, 'token:before', 1);
        const [node, promoted] = [new Redis(redis.url), new Redis(replacement.url)];
        try {
          expect(await node.exists('gw:requests:token:before')).toBe(1);
          // The failover: the node becomes a replica of another, and the name leads to that one.
          await node.call('REPLICAOF', '127.0.0.1', String(replacement.port));
          proxy.retarget(replacement.port);
          let n = 0;
          await until(async () => {
            const caller = `token:after-${n++}`;
            await take(limiter, caller, 1);
            return (await promoted.exists(`gw:requests:${caller}`)) === 1;
          }, 'a count on the node the name now leads to');
          expect(
            sampleOf(
              await metrics.registry.metrics(),
              'gateway_shared_state_fallbacks_total{store="limits",reason="read_only"}',
            ),
          ).toBeGreaterThan(0);
        } finally {
          node.disconnect();
          promoted.disconnect();
        }
      });
    },
  );
});
