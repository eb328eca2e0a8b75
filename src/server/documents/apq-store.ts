import { LRUCache } from 'lru-cache';
import { readStamped, type SharedRedis } from '../shared-state/shared-redis.js';

/** APQ texts by hash, asynchronous so that Redis can stand in; a registration is charged to its `owners`. */
export interface PersistedQueryStore {
  get(hash: string): Promise<string | undefined>;
  set(hash: string, query: string, owners?: readonly string[]): Promise<void>;
}

export interface MemoryQueryStoreOptions {
  readonly maxEntries: number;
  /** UTF-8 bytes of query text, all entries together. */
  readonly maxBytes: number;
  /** The share of both bounds one owner's registrations may take (APQ_CALLER_SHARE). @default all of them */
  readonly ownerShare?: number;
}

/** One process's store: LRU, an owner's own oldest out past its share; a registration stays its first owners'. */
export function createMemoryQueryStore(options: MemoryQueryStoreOptions): PersistedQueryStore {
  const share = options.ownerShare ?? 1;
  const maxOwnedEntries = Math.ceil(options.maxEntries * share);
  const maxOwnedBytes = Math.ceil(options.maxBytes * share);
  // By owner: its registrations (oldest first) and their bytes.
  const owned = new Map<string, { bytes: number; readonly hashes: Set<string> }>();
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
      // Over an owner's share on its own (as the Redis script refuses it): not stored, nothing pushed out for it.
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

/** Its bounds are Redis's: every replica's registrations together. */
export interface RedisQueryStoreOptions extends MemoryQueryStoreOptions {
  readonly redis: SharedRedis;
  /** This process's store: answers first, and alone while Redis is unreachable. */
  readonly local: PersistedQueryStore;
  readonly ttlSeconds: number;
}

/** A registration's hash (usePersistedDocuments checks it is the text's SHA-256): nothing else is looked up. */
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** On a Cluster, registrations spread over at most this many hash slots (and the masters holding them). */
const MAX_SHARDS = 16;
/** Each shard's least registrations and bytes: small bounds stay one shard, exact. */
const MIN_SHARD_ENTRIES = 8;
const MIN_SHARD_BYTES = 128 * 1024;

/**
 * Shards by hash with even bounds, each three keys under one hash tag (one script, one Cluster slot): `…:texts`
 * (hash -> text `stamped` with its expiry), `…:index` (hashes by expiry: registration order) and `…:bytes` (the total).
 */
function shardsFor(maxEntries: number, maxBytes: number) {
  const fit = Math.min(MAX_SHARDS, Math.floor(maxEntries / MIN_SHARD_ENTRIES), Math.floor(maxBytes / MIN_SHARD_BYTES));
  const count = Math.max(1, fit);
  return { count, maxEntries: Math.floor(maxEntries / count), maxBytes: Math.floor(maxBytes / count) };
}

/**
 * One registration in one shard, atomic across replicas. KEYS: texts, index, bytes, then each owner's sorted set; ARGV:
 * hash, text, TTL (ms), the shard's two bounds, now (ms), an owner's two bounds. The text is written first, so Redis at
 * `maxmemory` refuses the script before any change; then owners' oldest go past their share, then the index's expired
 * and oldest. Every key expires; none is scanned but an owner's.
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
    local oldest = redis.call('ZPOPMIN', KEYS[i])[1]
    held = held - redis.call('HSTRLEN', texts, oldest)
    count = count - 1
    forget(oldest)
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
for i = 4, #KEYS do redis.call('ZADD', KEYS[i], score, hash) end
redis.call('SET', bytes, total + size)
for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ttl) end
return 1`;

interface ApqCommands {
  gwApqRegister(...keysThenArgs: (string | number)[]): Promise<number>;
  hget(key: string, field: string): Promise<string | null>;
}

/** Registrations shared through Redis (`shardsFor`), the local store first: a hash names its text for good. */
export function createRedisQueryStore(options: RedisQueryStoreOptions): PersistedQueryStore {
  const { redis, local, ttlSeconds } = options;
  const shards = shardsFor(options.maxEntries, options.maxBytes);
  redis.client.defineCommand('gwApqRegister', { lua: registerScript });
  const share = options.ownerShare ?? 1;
  const owned = { maxEntries: Math.ceil(shards.maxEntries * share), maxBytes: Math.ceil(shards.maxBytes * share) };
  const client = redis.client as unknown as ApqCommands;
  const tagOf = (hash: string) => `gw:apq:{apq-${Number.parseInt(hash.slice(0, 2), 16) % shards.count}}:`;
  const fellBack = (error?: unknown): undefined => {
    redis.fellBack('apq', error);
    return undefined;
  };
  return {
    async get(hash) {
      const known = await local.get(hash);
      if (known !== undefined || !SHA256_HEX.test(hash)) return known;
      if (!redis.ready()) return fellBack();
      try {
        const registration = readStamped(await client.hget(`${tagOf(hash)}texts`, hash));
        // Past its time, a registration is gone (the shard drops it at its next registration).
        if (registration === undefined || registration.expiresAt <= Date.now()) return undefined;
        await local.set(hash, registration.text);
        return registration.text;
      } catch (error) {
        return fellBack(error);
      }
    },
    async set(hash, query, owners = []) {
      await local.set(hash, query, owners);
      if (!SHA256_HEX.test(hash)) return;
      if (!redis.ready()) return fellBack();
      const tag = tagOf(hash);
      const keys = [`${tag}texts`, `${tag}index`, `${tag}bytes`, ...owners.map((owner) => `${tag}owned:${owner}`)];
      const argv = [hash, query, ttlSeconds * 1000, shards.maxEntries, shards.maxBytes, Date.now()];
      await client.gwApqRegister(keys.length, ...keys, ...argv, owned.maxEntries, owned.maxBytes).catch(fellBack);
    },
  };
}
