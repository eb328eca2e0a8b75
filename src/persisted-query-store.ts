import { LRUCache } from 'lru-cache';

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
