import { createHash, randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { startServer, stopAll } from '../bench/processes.js';
import { startRedis } from '../test/support/redis.js';

/*
 * `npx tsx scripts/measure-apq-redis.ts [--count 3000] [--bytes 95000] [--maxmemory 64mb]`
 *
 * Not a test: what APQ registrations cost a Redis shared through REDIS_URL. A redis-server
 * (`--maxmemory` with `noeviction` when given), the reference upstream and a gateway
 * (`src/main.ts`, with the request and in-flight limiters on so they write to Redis too) run on
 * loopback ports. Two phases, Redis emptied before each: `count` junk registrations (text that is
 * no GraphQL, with its right SHA-256) and `count` distinct valid ones (`{ __typename }` and a
 * comment), each `bytes` long. Printed per phase: the answers' HTTP statuses, Redis's
 * used_memory grown, its keys and the bytes of the APQ texts in it; at the end the gateway's
 * shared-state fallback counters and its warning lines about Redis.
 */

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '3000' },
    bytes: { type: 'string', default: '95000' },
    maxmemory: { type: 'string' },
  },
});
const count = Number(values.count);
const bytes = Number(values.bytes);

const redis = await startRedis({
  args: values.maxmemory === undefined ? [] : ['--maxmemory', values.maxmemory, '--maxmemory-policy', 'noeviction'],
});
const client = new Redis(redis.url);
const upstream = await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], undefined, {
  PORT: '0',
  RECORD: '0',
});
const gateway = await startServer('gateway', ['--import', 'tsx', 'src/main.ts'], undefined, {
  PORT: '0',
  UPSTREAM_URL: upstream.url,
  REDIS_URL: redis.url,
  LOG_LEVEL: 'warn',
  WORKERS: '1',
  RATE_LIMIT_REQUESTS_PER_SECOND: '100000',
  RATE_LIMIT_IN_FLIGHT: '1000',
});
const redisWarnings: string[] = [];
createInterface({ input: gateway.child.process.stdout! }).on('line', (line) => {
  if (/"level":40/.test(line) && /redis/i.test(line)) redisWarnings.push(line);
});
const endpoint = new URL(gateway.url);
const pool = new Pool(endpoint.origin, { connections: 4 });

const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await client.info('memory'))![1]);
const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

/** Every key in Redis, with SCAN, and the registrations' texts among them (`gw:apq:<hash>`) with their bytes. */
async function keysAndApqBytes(): Promise<{ keys: number; apqKeys: number; apqBytes: number }> {
  let keys = 0;
  let apqKeys = 0;
  let apqBytes = 0;
  for await (const batch of client.scanStream({ count: 1000 }) as AsyncIterable<string[]>) {
    keys += batch.length;
    for (const key of batch.filter((k) => /^gw:apq:[0-9a-f]{64}$/.test(k))) {
      apqKeys++;
      apqBytes += await client.strlen(key);
    }
  }
  return { keys, apqKeys, apqBytes };
}

async function register(text: string): Promise<number> {
  const hash = createHash('sha256').update(text).digest('hex');
  const response = await pool.request({
    path: endpoint.pathname,
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json',
      authorization: `Bearer measure-${hash.slice(0, 8)}`,
    },
    body: JSON.stringify({ query: text, extensions: { persistedQuery: { version: 1, sha256Hash: hash } } }),
  });
  await response.body.dump();
  return response.statusCode;
}

async function phase(name: string, text: (i: number) => string): Promise<void> {
  await client.flushall();
  const before = await usedMemory();
  const statuses = new Map<number, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = next++; i < count; i = next++) {
        const status = await register(text(i));
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }),
  );
  const after = await usedMemory();
  const { keys, apqKeys, apqBytes } = await keysAndApqBytes();
  const answered = [...statuses].map(([status, n]) => `${n} x HTTP ${status}`).join(', ');
  console.log(
    `${name.padEnd(6)} ${count} x ${bytes} B: ${answered}; Redis used_memory +${mb(after - before)} (${mb(after)}), ${keys} keys, ${apqKeys} APQ texts of ${mb(apqBytes)}`,
  );
}

/** `prefix` then random hex and a comment-safe tail, `bytes` long in all. */
const padded = (prefix: string) =>
  prefix +
  randomBytes(Math.ceil(bytes / 2))
    .toString('hex')
    .slice(0, bytes - prefix.length);

try {
  await phase('junk', () => padded('junk '));
  await phase('valid', () => padded('{ __typename } # '));
  const metrics = await (await fetch(new URL('/metrics', endpoint))).text();
  console.log(
    metrics
      .split('\n')
      .filter((line) => line.startsWith('gateway_shared_state_'))
      .join('\n') || 'no gateway_shared_state_* sample',
  );
  console.log(
    `gateway warnings about Redis: ${redisWarnings.length}${redisWarnings.length > 0 ? `, the first: ${redisWarnings[0]}` : ''}`,
  );
} finally {
  await pool.close();
  client.disconnect();
  await stopAll();
  await redis.stop();
}
