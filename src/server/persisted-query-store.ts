import { LRUCache } from 'lru-cache';
import type { SharedRedis } from './shared-state.js';

/**
 * Where automatic persisted queries (hash -> query text) are kept. Asynchronous so that a store
 * shared by replicas (Redis) can stand in for the in-memory one.
 */
export interface PersistedQueryStore {
  get(hash: string): Promise<string | undefined>;
  set(hash: string, query: string): Promise<void>;
}

export interface MemoryQueryStoreOptions {
  /** Queries kept at most. */
  readonly maxEntries: number;
  /** Bytes (UTF-8) of query text kept at most, all entries together. */
  readonly maxBytes: number;
}

/** One process's store: the least recently used queries go first when either bound is reached. */
export function createMemoryQueryStore(options: MemoryQueryStoreOptions): PersistedQueryStore {
  const cache = new LRUCache<string, string>({ max: options.maxEntries, maxSize: options.maxBytes, sizeCalculation: (query) => Buffer.byteLength(query) });
  return {
    get: async (hash) => cache.get(hash),
    set: async (hash, query) => {
      cache.set(hash, query);
    },
  };
}

export interface RedisQueryStoreOptions {
  readonly redis: SharedRedis;
  /** This process's store: answers first, and alone while Redis is unreachable. */
  readonly local: PersistedQueryStore;
  /** How long a registration lives in Redis. */
  readonly ttlSeconds: number;
  /** Registrations kept in Redis at most, every replica's together. */
  readonly maxEntries: number;
  /** Bytes (UTF-8) of query text kept in Redis at most, every replica's together. */
  readonly maxBytes: number;
}

/** A registration's text is `gw:apq:<hash>`; the three keys below index them (no hash is named so). */
const APQ_PREFIX = 'gw:apq:';
const INDEX_KEYS = ['gw:apq:index', 'gw:apq:sizes', 'gw:apq:bytes'] as const;

/** What a registration's hash can be (useAPQ checks it is the text's SHA-256): nothing else is looked up. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

/**
 * One registration, atomic across replicas. KEYS: the index (a sorted set of hashes by expiry
 * time, which is also registration order: one TTL for all), each hash's size, the byte total,
 * the text's key; ARGV: hash, text, TTL in ms, the two bounds, the texts' prefix (the evicted
 * texts' keys are built here: one Redis, not a cluster). The text is written first: under
 * `maxmemory` with nothing to evict Redis refuses the script there, before it changed anything.
 * Then the index drops the expired (Redis has dropped their texts), the same hash registered
 * before, and the oldest until the new one fits. Every key expires; none is scanned.
 */
const registerScript = `local size = string.len(ARGV[2])
local ttl, maxEntries, maxBytes = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if size > maxBytes then return 0 end
redis.call('SET', KEYS[4], ARGV[2], 'PX', ttl)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local total = redis.call('GET', KEYS[3])
if total then
  total = tonumber(total)
else
  total = 0
  for _, bytes in ipairs(redis.call('HVALS', KEYS[2])) do total = total + tonumber(bytes) end
end
local function forget(hash)
  total = total - tonumber(redis.call('HGET', KEYS[2], hash) or '0')
  redis.call('HDEL', KEYS[2], hash)
  redis.call('ZREM', KEYS[1], hash)
end
forget(ARGV[1])
for _, hash in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 100)) do forget(hash) end
while total + size > maxBytes or redis.call('ZCARD', KEYS[1]) >= maxEntries do
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not oldest then break end
  forget(oldest)
  redis.call('DEL', ARGV[6] .. oldest)
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], size)
redis.call('SET', KEYS[3], total + size, 'PX', ttl)
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return 1`;

interface ApqCommands {
  gwApqRegister(...args: (string | number)[]): Promise<number>;
}

/**
 * Registrations shared by every process and replica through Redis, each kept `ttlSeconds`, at
 * most `maxEntries` and `maxBytes` of text in all (the oldest registrations go first). The
 * process's own store answers first (a hash names its text for good, so a local copy never goes
 * stale) and keeps every registration too, so while Redis is unreachable or refuses writes the
 * process goes on as if it had none: what it registered still runs, what others registered is
 * PersistedQueryNotFound once (the client then sends the text).
 */
export function createRedisQueryStore(options: RedisQueryStoreOptions): PersistedQueryStore {
  const { redis, local, ttlSeconds, maxEntries, maxBytes } = options;
  redis.client.defineCommand('gwApqRegister', { numberOfKeys: 4, lua: registerScript });
  const client = redis.client as unknown as ApqCommands & SharedRedis['client'];
  return {
    async get(hash) {
      const known = await local.get(hash);
      if (known !== undefined || !SHA256_HEX.test(hash)) return known;
      if (!redis.ready()) {
        redis.fellBack('apq');
        return undefined;
      }
      try {
        const shared = await client.get(APQ_PREFIX + hash);
        if (shared === null) return undefined;
        await local.set(hash, shared);
        return shared;
      } catch (error) {
        redis.fellBack('apq', error);
        return undefined;
      }
    },
    async set(hash, query) {
      await local.set(hash, query);
      if (!redis.ready()) return redis.fellBack('apq');
      await client.gwApqRegister(...INDEX_KEYS, APQ_PREFIX + hash, hash, query, ttlSeconds * 1000, maxEntries, maxBytes, APQ_PREFIX).then(
        () => undefined,
        (error: unknown) => redis.fellBack('apq', error),
      );
    },
  };
}
