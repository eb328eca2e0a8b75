import { createHash } from 'node:crypto';
import type { Plugin as EnvelopPlugin } from '@envelop/core';
import { type Cache, useResponseCache } from '@envelop/response-cache';
import stableStringify from 'fast-json-stable-stringify';
import fresh from 'fresh';
import { type GraphQLObjectType, type GraphQLSchema, getNamedType, isObjectType } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import type { ResponseCacheSettings } from '../../config.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import { type OperationState, operationOf } from '../operation-state.js';
import { type AnswerStep, isPromise, type Policy } from '../pipeline/stages.js';
import type { Cacheable } from '../request-state.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import { type CachedAnswer, type GatewayCache, ResponseCache } from './cache.js';
import { evictionsAfter, evictionsOf, goneHeadRecords, typesWithoutIds, upstreamFaultOf } from './evictions.js';
import { createMemoryResponseCache } from './memory-store.js';
import { createRedisResponseCache } from './redis-store.js';

export interface GatewayResponseCacheOptions {
  readonly cache: GatewayCache;
  /** RESPONSE_CACHE_TTL_MS */
  readonly ttlMs: number;
  /** RESPONSE_CACHE_TTL_PER_TYPE: object type names and their TTL in ms. */
  readonly ttlPerType: Readonly<Record<string, number>>;
  /**
   * RESPONSE_CACHE_STALE_IF_ERROR_MS: whether a read that fails is answered with its kept answer past its TTL (0:
   * never).
   */
  readonly staleIfErrorMs: number;
}

/**
 * An answer's entity tag: a SHA-256 of its data (weak: the same data compressed or not, as JSON
 * or as graphql-response+json, is the same to a client). Made once per data object: hits from
 * process memory share theirs.
 */
const tags = new WeakMap<object, string>();
export function tagOf(data: object): string {
  let tag = tags.get(data);
  if (tag === undefined) {
    tag = `W/"${createHash('sha256').update(JSON.stringify(data)).digest('base64url')}"`;
    tags.set(data, tag);
  }
  return tag;
}

/**
 * The key an answer is kept under, `<scope>:<hash>`: the scope names the caller (the last 16
 * characters of its session, or `public`), which the stores' byte bounds charge (`scopeOfKey`); the
 * hash is of the query text, the operation name, the variables (sorted) and the session, by
 * node:crypto (the library's default hashes with WebCrypto's asynchronous digest: a fifth of a
 * hit's CPU, and a trip through the thread pool).
 */
export function responseCacheKey(
  documentString: string,
  operationName: string | null | undefined,
  variables: unknown,
  sessionId: string | null | undefined,
): string {
  // The session is a hash of the credential already (`token:<SHA-256, base64url>`): 16 of its characters name the
  // scope.
  const scope = sessionId == null ? 'public' : sessionId.slice(-16);
  return `${scope}:${createHash('sha256')
    .update(`${documentString}|${operationName ?? ''}|${stableStringify(variables ?? {})}|${sessionId ?? ''}`)
    .digest('hex')}`;
}

/** What an answer kept fresh, or just stored for `ttlMs`, says to HTTP caches. */
const freshFor = (data: object, ms: number): Cacheable => ({
  maxAge: Math.max(0, Math.floor(ms / 1000)),
  tag: tagOf(data),
});

/**
 * The response cache's policy, and the envelop plugins that keep what execution answers (the execution policy's engine
 * runs them).
 */
export type ResponseCacheSteps = Policy & { readonly envelop: readonly EnvelopPlugin[] };

/**
 * The response cache (@envelop/response-cache over the gateway's stores), in the stages it acts in:
 * - admission, its last step (after the caller limits, whose refusal then replaces a hit): a
 *   query's key (the query text, operation name, variables and the caller's session: a hash of the
 *   normalised Authorization credential, the caller limits' key, or one public scope without one)
 *   and its lookup; a hit is the operation's result, its kept JSON what the client is sent, and
 *   needs no plan nor execution. Never looked up: mutations (they evict), operations with @defer
 *   or @stream (a hit would answer in one part what the client asked for in several).
 * - execution (the engine's envelop) and result: the library's plugin runs a miss with the
 *   `__typename` and `id` of its entities and keeps an answer without errors (not introspection)
 *   for its TTL, findable by its entities; a
 *   mutation's returned objects and what its fields declare they change (`evictionsOf`, by their
 *   outcome) are evicted before its answer is sent, for every caller. A read that fails upstream
 *   (RESPONSE_CACHE_STALE_IF_ERROR_MS) is answered with its caller's kept answer, marked stale.
 * - answer: a cacheable JSON answer (not a batch's) has a weak ETag made from its data, and a GET
 *   whose `If-None-Match` names it gets 304 with no body; what it says is on the request's state
 *   (`cacheable`), which the one writer of cache headers writes (answers/answer-headers.ts).
 */
export function useGatewayResponseCache(options: GatewayResponseCacheOptions): ResponseCacheSteps {
  const { cache } = options;
  // Neither parts, nor a live query's results (read with loaders that learn what it watches), nor a subscription's
  // events.
  const keeps = (operation: OperationState | undefined) =>
    operation !== undefined &&
    operation.prepared?.incremental !== true &&
    !operation.live &&
    operation.definition?.operation !== 'subscription';
  const library = useResponseCache({
    // Looked up at admission: execution only stores and evicts.
    cache: {
      get: () => null,
      set: (key, result, entities, ttl) => cache.set(key, result, entities, ttl),
      invalidate: (entities) => cache.invalidate(entities),
    } satisfies Cache,
    session: (context) => operationOf(context)?.request.tokenCaller ?? null,
    buildResponseCacheKey: ({ context }) => operationOf(context)?.cacheKey ?? '',
    enabled: (context) => keeps(operationOf(context)),
    ttl: options.ttlMs,
    ttlPerSchemaCoordinate: { 'Query.__schema': 0, 'Query.__type': 0, ...options.ttlPerType },
    onTtl: ({ ttl, context }) => {
      const operation = operationOf(context);
      if (operation !== undefined) operation.cacheTtl = ttl;
      return ttl;
    },
    // An answer with errors (a partial one too) is never kept: what `afterExecution` reads as kept.
    shouldCacheResult: ({ result }) => !result.errors?.length,
    includeExtensionMetadata: false,
  }) as EnvelopPlugin;
  // Before the library's own onExecuteDone, which stores the answer.
  const evictions: EnvelopPlugin = {
    onExecute({ args }) {
      const operation = operationOf(args.contextValue);
      const fields = evictionsOf(args);
      if (fields.length > 0 && operation !== undefined) operation.evictions = fields;
      const types = fields.length > 0 ? [] : typesWithoutIds(args.schema, args.document);
      if (types.length === 0) return undefined;
      return {
        onExecuteDone: ({ result }) => void (isAsyncIterable(result) ? undefined : cache.alsoHolds(result, types)),
      };
    },
  };
  return {
    name: 'response cache',
    admission(operation) {
      if (operation.definition?.operation !== 'query' || !keeps(operation)) return undefined;
      const { params } = operation;
      const key = responseCacheKey(
        params.query!,
        params.operationName,
        params.variables,
        operation.request.tokenCaller ?? null,
      );
      operation.cacheKey = key;
      const hit = (answer: CachedAnswer | undefined): undefined => {
        if (answer === undefined || answer.result.data == null) return undefined;
        operation.result = answer.result;
        operation.cached = answer;
        cacheableFrom(operation, freshFor(answer.result.data, answer.expiresAt - Date.now()));
        return undefined;
      };
      const looked = cache.lookup(key, operation.request.caller.address);
      return isPromise(looked) ? looked.then(hit) : hit(looked);
    },
    envelop: [evictions, library],
    result: (operation) => afterExecution(operation, options),
    answer: notModified,
  };
}

/** The answer stage's step: 304 with no body to a GET whose `If-None-Match` names the answer's tag. */
const notModified: AnswerStep = (request, answer) => {
  const { cacheable } = request;
  // A whole JSON answer to a GET (only a query's is cacheable; never one in parts, whose stream would be left running).
  if (!cacheable || request.http.method !== 'GET' || answer.status !== 200 || typeof answer.body !== 'string') return;
  const ifNoneMatch = request.headers.get('if-none-match');
  if (ifNoneMatch === null || !fresh({ 'if-none-match': ifNoneMatch }, { etag: cacheable.tag })) return;
  answer.status = 304;
  answer.headers.delete('content-type');
  answer.body = null;
};

/**
 * What an operation's answer says to HTTP caches: the request's, unless it is a batch's (its operations share one
 * response).
 */
function cacheableFrom(operation: OperationState, cacheable: Cacheable): void {
  const { request } = operation;
  request.cacheable = request.batched ? false : cacheable;
}

/**
 * The response cache's step of the result stage, once the operation has a result: a read that
 * failed upstream is answered with its kept answer (stale past its TTL, or fresh again); an answer
 * kept now says its TTL; a mutation's evictions are made by its outcome, and its answer waits for
 * every eviction under way (a read that follows it finds no stale answer).
 */
function afterExecution(operation: OperationState, options: GatewayResponseCacheOptions): Promise<void> | undefined {
  const { cache } = options;
  const { result, cacheKey: key } = operation;
  if (result === undefined || isAsyncIterable(result)) return undefined;
  const fault =
    options.staleIfErrorMs > 0 && key !== undefined && operation.cached === undefined
      ? upstreamFaultOf(result)
      : undefined;
  if (fault !== undefined) {
    // A read that failed upstream: its answer kept for this caller (the key holds the caller), expired less than
    // RESPONSE_CACHE_STALE_IF_ERROR_MS ago.
    const serve = (kept: CachedAnswer | undefined) => {
      if (kept?.result.data == null) return;
      const left = kept.expiresAt - Date.now();
      const stale = left > 0 ? undefined : { reason: fault, expiredMs: -left };
      operation.result = {
        data: kept.result.data,
        extensions: { ...kept.result.extensions, ...(stale === undefined ? {} : { stale }) },
      };
      const tag = tagOf(kept.result.data);
      // Its Age counts from when it was stored (RFC 9111 §4.2.3); one an older build kept, from its expiry.
      const ageMs = kept.storedAt === undefined ? -left : Date.now() - kept.storedAt;
      cacheableFrom(
        operation,
        stale === undefined
          ? { maxAge: Math.floor(left / 1000), tag }
          : { maxAge: 0, tag, stale: { ageSeconds: Math.ceil(ageMs / 1000) } },
      );
    };
    const kept = cache.stale(key!);
    if (isPromise(kept)) return kept.then(serve);
    serve(kept);
    return undefined;
  }
  if (operation.cached === undefined) {
    // Kept by the library: it worked its TTL out (`onTtl`), and keeps an answer without errors for a TTL above 0.
    const ttl = operation.cacheTtl ?? 0;
    cacheableFrom(
      operation,
      ttl > 0 && !result.errors?.length && result.data != null ? freshFor(result.data, ttl) : false,
    );
  }
  // After the mutation's upstream call, before its answer. Only what the mutation may have changed: not when it was
  // refused before its call, or answered 4xx.
  const fields = operation.evictions;
  // And a head a read found gone (404): its kept answers, as its deletion's would (never served stale again).
  const gone = operation.context?.loaders.heads.gone();
  const written = fields === undefined ? [] : evictionsAfter(fields, result);
  const evictions = gone === undefined || gone.length === 0 ? written : [...written, ...goneHeadRecords(gone)];
  const evicting = evictions.length === 0 ? undefined : cache.evict(evictions);
  // A mutation's answer waits for the evictions of the objects it returned too (the library's, under way); a query's
  // waits for none.
  const settled = operation.definition?.operation === 'mutation' ? cache.settled() : undefined;
  if (evicting === undefined) return settled;
  return settled === undefined ? evicting : Promise.all([evicting, settled]).then(() => undefined);
}

/**
 * RESPONSE_CACHE_TTL_PER_TYPE as the schema reads it: a type's TTL holds for the lists of it too,
 * the edges whose `node` is one and the connections whose `nodes` or `edges` hold them (their
 * shortest TTL when they list several), so `permissions { totalCount }`, which holds no
 * Permission, is kept no longer than a Permission is (with `Permission=0`, never).
 */
export function ttlPerTypeOf(
  schema: GraphQLSchema,
  ttlPerType: Readonly<Record<string, number>>,
): Readonly<Record<string, number>> {
  const ttls = new Map(Object.entries(ttlPerType));
  const listed = (type: GraphQLObjectType, field: string) => {
    const found = type.getFields()[field];
    return found === undefined ? undefined : ttls.get(getNamedType(found.type).name);
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (const type of Object.values(schema.getTypeMap())) {
      if (!isObjectType(type) || type.name.startsWith('__')) continue;
      const inherited = [listed(type, 'node'), listed(type, 'nodes'), listed(type, 'edges')].filter(
        (ttl) => ttl !== undefined,
      );
      if (inherited.length === 0) continue;
      const ttl = Math.min(...inherited, ttls.get(type.name) ?? Number.POSITIVE_INFINITY);
      if (ttl !== ttls.get(type.name)) {
        ttls.set(type.name, ttl);
        changed = true;
      }
    }
  }
  return Object.fromEntries(ttls);
}

/**
 * The response cache over its store: with REDIS_URL, Redis alone, shared by every process and
 * replica (no copy in this process's memory in front of it: a write through another replica
 * must be seen by the next read here); else this process's memory, bounded by `settings.bounds`,
 * whose entries and bytes the gauges show. Its events are counted in `metrics`.
 */
export function responseCachePlugin(
  settings: ResponseCacheSettings,
  schema: GraphQLSchema,
  operationTimeoutMs: number,
  metrics: GatewayMetrics,
  redis: SharedRedis | undefined,
): ResponseCacheSteps {
  // How long a miss waits for its answer at most: the operation's deadline, with room.
  const answerWithinMs = 2 * operationTimeoutMs;
  let cache: GatewayCache;
  if (redis === undefined) {
    const store = createMemoryResponseCache(settings.bounds, settings.maxEntryBytes, {
      overBudget: metrics.responseCacheOverBudget,
      keepExpiredMs: settings.staleIfErrorMs,
    });
    cache = new ResponseCache(store, metrics.watchResponseCache(store.use), answerWithinMs);
  } else {
    const maxTtlMs = Math.max(settings.ttlMs, ...Object.values(settings.ttlPerType));
    const store = createRedisResponseCache({
      redis,
      maxTtlMs,
      keepExpiredMs: settings.staleIfErrorMs,
      maxEntryBytes: settings.maxEntryBytes,
      raceWindowMs: answerWithinMs,
      budget: settings.bounds,
      overBudget: metrics.responseCacheOverBudget,
    });
    cache = new ResponseCache(store, metrics.watchResponseCache(undefined), answerWithinMs);
  }
  return useGatewayResponseCache({
    cache,
    ttlMs: settings.ttlMs,
    ttlPerType: ttlPerTypeOf(schema, settings.ttlPerType),
    staleIfErrorMs: settings.staleIfErrorMs,
  });
}
