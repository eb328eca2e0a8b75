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
}

const APQ_PREFIX = 'gw:apq:';

/**
 * Registrations shared by every process and replica through Redis, each kept `ttlSeconds`. The
 * process's own store answers first (a hash names its text for good, so a local copy never goes
 * stale) and keeps every registration too, so while Redis is unreachable or refuses writes the
 * process goes on as if it had none: what it registered still runs, what others registered is
 * PersistedQueryNotFound once (the client then sends the text).
 */
export function createRedisQueryStore(options: RedisQueryStoreOptions): PersistedQueryStore {
  const { redis, local, ttlSeconds } = options;
  return {
    async get(hash) {
      const known = await local.get(hash);
      if (known !== undefined) return known;
      if (!redis.ready()) {
        redis.fellBack('apq');
        return undefined;
      }
      try {
        const shared = await redis.client.get(APQ_PREFIX + hash);
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
      await redis.client.set(APQ_PREFIX + hash, query, 'EX', ttlSeconds).then(
        () => undefined,
        (error: unknown) => redis.fellBack('apq', error),
      );
    },
  };
}
