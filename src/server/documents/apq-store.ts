import { LRUCache } from 'lru-cache';
import { readStamped, type SharedRedis } from '../shared-state/shared-redis.js';

/**
 * Where automatic persisted queries (hash -> query text) are kept. Asynchronous so that a store
 * shared by replicas (Redis) can stand in for the in-memory one. A registration is charged to
 * those who made it (`owners`: its caller's key and its client address), each of whom may hold a
 * share of the store (APQ_CALLER_SHARE): past it, its own oldest registrations go.
 */
export interface PersistedQueryStore {
  get(hash: string): Promise<string | undefined>;
  set(hash: string, query: string, owners?: readonly string[]): Promise<void>;
}

export interface MemoryQueryStoreOptions {
  /** Queries kept at most. */
  readonly maxEntries: number;
  /** Bytes (UTF-8) of query text kept at most, all entries together. */
  readonly maxBytes: number;
  /** The share of both bounds one owner's registrations may take (APQ_CALLER_SHARE). @default all of them */
  readonly ownerShare?: number;
}

/** One owner's registrations (their hashes, oldest first) and their bytes together. */
interface Owned {
  bytes: number;
  readonly hashes: Set<string>;
}

/**
 * One process's store: the least recently used queries go first when either bound is reached,
 * and an owner's own oldest when it would pass its share. A registration stays its first owners'
 * (registering a known hash again changes nothing): no one can take another's registration over
 * and push it out with its own. Bounded: one entry per owner with registrations, at most two per
 * registration.
 */
export function createMemoryQueryStore(options: MemoryQueryStoreOptions): PersistedQueryStore {
  const share = options.ownerShare ?? 1;
  const maxOwnedEntries = Math.ceil(options.maxEntries * share);
  const maxOwnedBytes = Math.ceil(options.maxBytes * share);
  const owned = new Map<string, Owned>();
  const ownersOf = new Map<string, readonly string[]>();
  const cache = new LRUCache<string, string>({
    max: options.maxEntries,
    maxSize: options.maxBytes,
    sizeCalculation: (query) => Buffer.byteLength(query),
    dispose: (query, hash) => {
      for (const owner of ownersOf.get(hash) ?? []) {
        const mine = owned.get(owner);
        if (mine === undefined) continue;
        mine.bytes -= Buffer.byteLength(query);
        mine.hashes.delete(hash);
        if (mine.hashes.size === 0) owned.delete(owner);
      }
      ownersOf.delete(hash);
    },
  });
  const makeRoom = (owner: string, bytes: number) => {
    const mine = owned.get(owner);
    if (mine === undefined) return;
    for (const oldest of mine.hashes) {
      if (mine.hashes.size < maxOwnedEntries && mine.bytes + bytes <= maxOwnedBytes) break;
      cache.delete(oldest);
    }
  };
  return {
    get: async (hash) => cache.get(hash),
    set: async (hash, query, owners = []) => {
      if (cache.has(hash)) return;
      const bytes = Buffer.byteLength(query);
      // Over an owner's share on its own (as the Redis script refuses it): not stored, and nothing of the owner's
      // pushed out for it.
      if (owners.length > 0 && bytes > maxOwnedBytes) return;
      for (const owner of owners) makeRoom(owner, bytes);
      cache.set(hash, query);
      if (!cache.has(hash)) return;
      ownersOf.set(hash, owners);
      for (const owner of owners) {
        const mine = owned.get(owner) ?? { bytes: 0, hashes: new Set<string>() };
        owned.set(owner, mine);
        mine.bytes += bytes;
        mine.hashes.add(hash);
      }
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
  /** The share of both bounds one owner's registrations may take (APQ_CALLER_SHARE). @default all of them */
  readonly ownerShare?: number;
}

/** What a registration's hash can be (useAPQ checks it is the text's SHA-256): nothing else is looked up. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Shards at most: on a Cluster, the registrations spread over this many hash slots (and the masters holding them). */
const MAX_SHARDS = 16;
/** Each shard holds at least this many registrations and bytes: small bounds stay one shard, as exact as before. */
const MIN_SHARD_ENTRIES = 8;
const MIN_SHARD_BYTES = 128 * 1024;

/**
 * The registrations are cut into shards by their hash, each a bound of its own (the bounds
 * divided evenly: SHA-256 spreads registrations evenly) in three keys sharing one hash tag, so
 * that a registration and its bound are one script in one slot of a Cluster:
 * `gw:apq:{apq-<n>}:texts` (a hash: hash -> the text `stamped` with its expiry), `…:index` (a sorted set
 * of the hashes by expiry time, which is also registration order: one TTL for all, and one
 * registered in the same millisecond as the newest scored just after it) and
 * `…:bytes` (the texts' total).
 */
function shardsFor(maxEntries: number, maxBytes: number): { count: number; maxEntries: number; maxBytes: number } {
  const count = Math.max(
    1,
    Math.min(MAX_SHARDS, Math.floor(maxEntries / MIN_SHARD_ENTRIES), Math.floor(maxBytes / MIN_SHARD_BYTES)),
  );
  return { count, maxEntries: Math.floor(maxEntries / count), maxBytes: Math.floor(maxBytes / count) };
}

/**
 * One registration, atomic across replicas, within one shard. KEYS: the shard's texts, index
 * and byte total, then each owner's registrations in the shard (a sorted set by registration);
 * ARGV: hash, text, TTL in ms, the shard's two bounds, now (ms), an owner's two bounds. A hash
 * registered and not expired stays its first owners' (nothing changes). The text is written
 * first: under `maxmemory` with nothing to evict Redis refuses the script there, before it changed
 * anything. Then each owner's oldest go until the new one fits in its share (what another
 * dropped, and this hash's expired registration, leave its set as it is counted), the index
 * drops the expired (their texts too), the same hash registered before, and the oldest until the
 * new one fits. Every key expires; none is scanned but an owner's few.
 */
const registerScript = `local texts, index, bytes = KEYS[1], KEYS[2], KEYS[3]
local hash, ttl, maxEntries, maxBytes, now = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local ownedEntries, ownedBytes = tonumber(ARGV[7]), tonumber(ARGV[8])
local value = (now + ttl) .. ':' .. ARGV[2]
local size = string.len(value)
if size > maxBytes or size > ownedBytes then return 0 end
local kept = redis.call('ZSCORE', index, hash)
if kept and tonumber(kept) > now then return 1 end
local old = redis.call('HSTRLEN', texts, hash)
redis.call('HSET', texts, hash, value)
local total = redis.call('GET', bytes)
if total then
  total = tonumber(total) - old
else
  total = 0
  for _, other in ipairs(redis.call('ZRANGE', index, 0, -1)) do
    if other ~= hash then total = total + redis.call('HSTRLEN', texts, other) end
  end
end
redis.call('ZREM', index, hash)
local function forget(other)
  total = total - redis.call('HSTRLEN', texts, other)
  redis.call('HDEL', texts, other)
  redis.call('ZREM', index, other)
end
for i = 4, #KEYS do
  local count, held = 0, 0
  for _, other in ipairs(redis.call('ZRANGE', KEYS[i], 0, -1)) do
    local length = redis.call('HSTRLEN', texts, other)
    if length == 0 or other == hash then redis.call('ZREM', KEYS[i], other) else count, held = count + 1, held + length end
  end
  while count > 0 and (count >= ownedEntries or held + size > ownedBytes) do
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0)[1]
    held = held - redis.call('HSTRLEN', texts, oldest)
    count = count - 1
    forget(oldest)
    redis.call('ZREM', KEYS[i], oldest)
  end
end
for _, other in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, 100)) do forget(other) end
while total + size > maxBytes or redis.call('ZCARD', index) >= maxEntries do
  local oldest = redis.call('ZRANGE', index, 0, 0)[1]
  if not oldest then break end
  forget(oldest)
end
-- Scored by expiry, after every other: two registrations in one millisecond keep their order.
local score = now + ttl
local newest = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')[2]
if newest and tonumber(newest) >= score then score = tonumber(newest) + 0.001 end
redis.call('ZADD', index, score, hash)
for i = 4, #KEYS do
  redis.call('ZADD', KEYS[i], score, hash)
  redis.call('PEXPIRE', KEYS[i], ttl)
end
redis.call('SET', bytes, total + size, 'PX', ttl)
redis.call('PEXPIRE', index, ttl)
redis.call('PEXPIRE', texts, ttl)
return 1`;

interface ApqCommands {
  gwApqRegister(...keysThenArgs: (string | number)[]): Promise<number>;
  hget(key: string, field: string): Promise<string | null>;
}

/**
 * Registrations shared by every process and replica through Redis (one node, a Sentinel-watched
 * master or a Cluster), each kept `ttlSeconds`, at most `maxEntries` and `maxBytes` in all (the
 * oldest registrations of its shard go first; see `shardsFor`). The process's own store answers
 * first (a hash names its text for good, so a local copy never goes stale) and keeps every
 * registration too, so while Redis is unreachable or refuses writes the process goes on as if it
 * had none: what it registered still runs, what others registered is PersistedQueryNotFound
 * once (the client then sends the text).
 */
export function createRedisQueryStore(options: RedisQueryStoreOptions): PersistedQueryStore {
  const { redis, local, ttlSeconds } = options;
  const shards = shardsFor(options.maxEntries, options.maxBytes);
  // Its number of keys first (the shard's three and one per owner).
  redis.client.defineCommand('gwApqRegister', { lua: registerScript });
  const share = options.ownerShare ?? 1;
  const owned = { maxEntries: Math.ceil(shards.maxEntries * share), maxBytes: Math.ceil(shards.maxBytes * share) };
  const client = redis.client as unknown as ApqCommands;
  /** The shard's keys: the first two hex digits of the hash pick it. */
  const shardOf = (hash: string) => {
    const tag = `gw:apq:{apq-${Number.parseInt(hash.slice(0, 2), 16) % shards.count}}:`;
    return { tag, keys: [`${tag}texts`, `${tag}index`, `${tag}bytes`] as const };
  };
  return {
    async get(hash) {
      const known = await local.get(hash);
      if (known !== undefined || !SHA256_HEX.test(hash)) return known;
      if (!redis.ready()) {
        redis.fellBack('apq');
        return undefined;
      }
      try {
        const registration = readStamped(await client.hget(shardOf(hash).keys[0], hash));
        // Past its time, a registration is gone (the shard drops it at its next registration).
        if (registration === undefined || registration.expiresAt <= Date.now()) return undefined;
        const shared = registration.text;
        await local.set(hash, shared);
        return shared;
      } catch (error) {
        redis.fellBack('apq', error);
        return undefined;
      }
    },
    async set(hash, query, owners = []) {
      await local.set(hash, query, owners);
      if (!SHA256_HEX.test(hash)) return;
      if (!redis.ready()) return redis.fellBack('apq');
      const { tag, keys } = shardOf(hash);
      const ownerKeys = owners.map((owner) => `${tag}owned:${owner}`);
      await client
        .gwApqRegister(
          3 + ownerKeys.length,
          ...keys,
          ...ownerKeys,
          hash,
          query,
          ttlSeconds * 1000,
          shards.maxEntries,
          shards.maxBytes,
          Date.now(),
          owned.maxEntries,
          owned.maxBytes,
        )
        .then(
          () => undefined,
          (error: unknown) => redis.fellBack('apq', error),
        );
    },
  };
}
