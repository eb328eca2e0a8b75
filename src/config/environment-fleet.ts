import { availableParallelism } from 'node:os';
import { setting } from './places.js';
import { redisUrl, text, variableDocs, workers } from './values.js';

/*
 * The fleet in the environment: the Redis every process and replica shares (and the response
 * cache's own), and the processes behind one port.
 */

/** The Redis the processes and replicas share. */
export const redis = {
  REDIS_URL: redisUrl().optional().register(variableDocs, {
    unset: 'unset: process memory',
    description:
      'Redis for the limit counters, APQ registrations and the response cache, shared by every process and replica: one node (`redis://`), a master watched by Sentinels (`redis-sentinel://`) or a Cluster (`redis-cluster://`); see [deploy](docs/deploy.md#redis)',
  }),
  RESPONSE_CACHE_REDIS_URL: redisUrl().optional().register(variableDocs, {
    unset: 'unset: `REDIS_URL`',
    description:
      "a Redis of the response cache's own (any `REDIS_URL` form), so its answers never take the memory the limit counters and APQ registrations need in `REDIS_URL`'s; see [the response cache](docs/response-cache.md#redis-memory)",
  }),
  REDIS_SENTINEL_PASSWORD: text('any text').optional().register(variableDocs, {
    unset: 'unset: none',
    description:
      "the Sentinels' own password (`requirepass` in sentinel.conf), with a `redis-sentinel://` `REDIS_URL`; Redis's password goes in the URL",
  }),
};

/** The processes of one replica. */
export const workerProcesses = {
  WORKERS: setting(
    'workers',
    workers()
      .default(1)
      .transform((value) => (value === 'auto' ? availableParallelism() : value)),
  ).register(variableDocs, { description: 'gateway processes behind one port (`node:cluster`); `auto`: one per CPU' }),
};
