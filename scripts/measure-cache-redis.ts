import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { root, startServer, stopAll } from '../bench/processes.js';
import { startRedis } from '../test/support/redis.js';

/*
 * `npx tsx scripts/measure-cache-redis.ts [--seconds 15] [--connections 4] [--maxmemory 60mb] [--budget 30000000]
 * [--checkout .]`
 *
 * Not a test: the hardening issue's attack on the response cache in a Redis it shares with the
 * limits (REDIS_URL alone). A redis-server (`--maxmemory` with `noeviction`, as
 * docs/operations.md sets it up), the reference upstream and two gateway replicas (the
 * checkout's `src/main.ts`, so another build can be measured: `--checkout /path/to/it`) with the
 * response cache on (RESPONSE_CACHE_MAX_BYTES `--budget`, half of `--maxmemory` as the docs advise;
 * a build without the budget ignores it) and a limit of 10 operations per caller per 10 s. For `--seconds`, each
 * connection sends a large read (some 0.75 MB of JSON) with a new made-up token each time, to
 * either replica; then a victim token sends 15 operations, alternating between the replicas.
 * Printed: the answers, Redis's used_memory grown, how many of the victim's 15 were let through
 * (10 when its limit held across the replicas), and the gateways' fallback and budget counters.
 */

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '15' },
    connections: { type: 'string', default: '4' },
    maxmemory: { type: 'string', default: '60mb' },
    budget: { type: 'string', default: '30000000' },
    checkout: { type: 'string', default: root },
  },
});
const seconds = Number(values.seconds);
const main = resolve(values.checkout, 'src/main.ts');

const redis = await startRedis({ args: ['--maxmemory', values.maxmemory, '--maxmemory-policy', 'noeviction'] });
const client = new Redis(redis.url);
const upstream = await startServer('upstream', ['--import', 'tsx', 'src/reference-upstream/main.ts'], undefined, {
  PORT: '0',
  RECORD: '0',
});
const env = {
  PORT: '0',
  UPSTREAM_URL: upstream.url,
  REDIS_URL: redis.url,
  LOG_LEVEL: 'warn',
  WORKERS: '1',
  RESPONSE_CACHE_TTL_MS: '60000',
  RESPONSE_CACHE_MAX_BYTES: values.budget,
  RATE_LIMIT_REQUESTS_PER_SECOND: '1',
  RATE_LIMIT_WINDOW_SECONDS: '10',
};
const replicas = await Promise.all(
  [0, 1].map((i) => startServer(`gateway ${i}`, ['--import', 'tsx', main], undefined, env)),
);
const pools = replicas.map(({ url }) => new Pool(new URL(url).origin, { connections: Number(values.connections) }));
const paths = replicas.map(({ url }) => new URL(url).pathname);

const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await client.info('memory'))![1]);
const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

// Every field of 100 heads and their hair, ten times over (aliases): some 0.7 MB of JSON.
const fields =
  'id uuid name url arUrl outputFormat style version lod createdAt updatedAt hair { id name url thumbnailUrl createdAt objMetadata } headMetadata';
const query = `{ ${['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].map((alias) => `${alias}: heads(first: 100) { nodes { ${fields} } }`).join(' ')} }`;

async function read(replica: number, token: string): Promise<{ status: number; bytes: number }> {
  const response = await pools[replica]!.request({
    path: paths[replica]!,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query }),
  });
  const text = await response.body.text();
  return { status: response.statusCode, bytes: Buffer.byteLength(text) };
}

try {
  const before = await usedMemory();
  const statuses = new Map<number, number>();
  let sent = 0;
  let largest = 0;
  const until = Date.now() + seconds * 1_000;
  await Promise.all(
    Array.from({ length: Number(values.connections) }, async () => {
      while (Date.now() < until) {
        const i = sent++;
        const { status, bytes } = await read(i % 2, `made-up-${i}-${Math.random().toString(36).slice(2)}`);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        largest = Math.max(largest, bytes);
      }
    }),
  );
  const grown = (await usedMemory()) - before;
  const victim: number[] = [];
  for (let i = 0; i < 15; i++) victim.push((await read(i % 2, 'the-victim')).status);
  const answered = [...statuses].map(([status, n]) => `${n} x HTTP ${status}`).join(', ');
  console.log(
    `made-up tokens: ${sent} reads in ${seconds} s (${answered}; answers up to ${mb(largest)}); Redis used_memory +${mb(grown)} (maxmemory ${values.maxmemory})`,
  );
  console.log(`victim: ${victim.filter((status) => status === 200).length} of 15 let through (${victim.join(' ')})`);
  for (const [i, { url }] of replicas.entries()) {
    const metrics = await (await fetch(new URL('/metrics', url))).text();
    const lines = metrics
      .split('\n')
      .filter((line) => /^gateway_(shared_state_fallbacks|response_cache_over_budget)_total/.test(line));
    console.log(`replica ${i}: ${lines.join('; ') || 'no fallback, nothing over budget'}`);
  }
} finally {
  for (const pool of pools) await pool.close();
  client.disconnect();
  await stopAll();
  await redis.stop();
}
