import { setting } from './places.js';
import { integer, openRatio, ttlPerType, variableDocs } from './values.js';

/*
 * The response cache in the environment: how long an answer is kept, how much is kept, whose
 * share, and for how long a stale one may stand in for a failed read.
 */

const mib = 1024 * 1024;

/** The response cache's lifetimes and bounds. */
export const responseCache = {
  // The response cache: off unless RESPONSE_CACHE_TTL_MS is set (server/response-cache/cache.ts,
  // docs/response-cache.md).
  RESPONSE_CACHE_TTL_MS: setting('responseCache.ttlMs', integer(0, 31_536_000_000).default(0)).register(variableDocs, {
    description:
      'how long an answer is kept in the response cache, per caller (bearer token) or in one public scope without a token; 0: no response cache (see [the response cache](docs/response-cache.md))',
  }),
  RESPONSE_CACHE_TTL_PER_TYPE: ttlPerType().optional().register(variableDocs, {
    unset: 'unset: `RESPONSE_CACHE_TTL_MS` for every type',
    description:
      'shorter or longer TTLs by the types an answer holds, e.g. `Permission=300000,Head=60000`: an answer lives as long as the shortest of its types allows (0: never kept)',
  }),
  RESPONSE_CACHE_MAX_ENTRIES: setting(
    'responseCache.bounds.maxEntries',
    integer(1, 10_000_000).default(10_000),
  ).register(variableDocs, {
    description:
      "answers the response cache keeps in each process's memory (without `REDIS_URL`), the least recently used dropped first",
  }),
  RESPONSE_CACHE_MAX_BYTES: setting(
    'responseCache.bounds.maxBytes',
    integer(1_024, 17_179_869_184).default(64 * mib),
  ).register(variableDocs, {
    description:
      "what the kept answers may weigh together, estimated: in each process's memory (about 2.4 bytes a byte of their JSON, and 350 bytes an object they hold; an answer weighing more than an eighth of it is not kept), or in Redis for all replicas together (their keys, values and index entries; past it an answer is not stored until older ones expire; see [Redis memory](docs/response-cache.md#redis-memory))",
  }),
  RESPONSE_CACHE_STALE_IF_ERROR_MS: setting('responseCache.staleIfErrorMs', integer(0, 86_400_000).default(0)).register(
    variableDocs,
    {
      description:
        "how long past its TTL a kept answer may still be served, marked stale, when its read fails with an upstream fault (5xx, a timeout, no connection, an open breaker); never across callers, never after a write evicted it, never for a mutation (RFC 5861's `stale-if-error`); 0: off (see [stale answers](docs/response-cache.md#stale-answers-on-failure))",
    },
  ),
  RESPONSE_CACHE_CALLER_SHARE: openRatio().default(0.1).register(variableDocs, {
    description:
      'the share of `RESPONSE_CACHE_MAX_BYTES` the answers of one caller (bearer token, or the public scope without one) may weigh, and those kept for one client address whatever tokens it sent: in memory its own oldest answers make room, in Redis its answers are not stored until older ones expire',
  }),
  RESPONSE_CACHE_MAX_ENTRY_BYTES: setting(
    'responseCache.maxEntryBytes',
    integer(1_024, 1_073_741_824).default(mib),
  ).register(variableDocs, {
    description:
      'bytes of JSON of the largest answer the response cache keeps, in process memory or in Redis; a larger one is executed each time',
  }),
};
