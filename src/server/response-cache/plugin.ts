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
import { changedFields, evictionsOf, goneHeadRecords, typesWithoutIds, upstreamFaultOf } from './evictions.js';
import { createMemoryResponseCache } from './memory-store.js';
import { createRedisResponseCache } from './redis-store.js';

/** A weak ETag (the same data in any encoding or media type is the same to a client): its SHA-256, once per object. */
const tags = new WeakMap<object, string>();
export function tagOf(data: object): string {
  const tag = tags.get(data) ?? `W/"${createHash('sha256').update(JSON.stringify(data)).digest('base64url')}"`;
  tags.set(data, tag);
  return tag;
}

/**
 * `<scope>:<hash>`: the caller's scope (`public`, or its session's last 16 characters) the byte bounds charge, and a
 * node:crypto hash (the library's WebCrypto digest cost a fifth of a hit's CPU and a trip through the thread pool).
 */
export function responseCacheKey(
  documentString: string,
  operationName: string | null | undefined,
  variables: unknown,
  sessionId: string | null | undefined,
): string {
  // The session (the caller limits' key) is a hash of the normalised credential already (`token:<SHA-256, base64url>`).
  const scope = sessionId == null ? 'public' : sessionId.slice(-16);
  return `${scope}:${createHash('sha256')
    .update(`${documentString}|${operationName ?? ''}|${stableStringify(variables ?? {})}|${sessionId ?? ''}`)
    .digest('hex')}`;
}

/** What an answer kept fresh, or just stored for `ttlMs`, says to HTTP caches. */
const freshFor = (data: object, ms: number) => ({ maxAge: Math.max(0, Math.floor(ms / 1000)), tag: tagOf(data) });

/** The response cache's policy, and the envelop plugins (run by the execution policy's engine) that keep answers. */
export type ResponseCacheSteps = Policy & { readonly envelop: readonly EnvelopPlugin[] };

/**
 * The response cache's steps for the schema an endpoint serves, over the process's one store (`responseCacheOf`), with
 * @envelop/response-cache: looked up at admission's last step (after the caller limits, whose refusal replaces a hit),
 * never for a mutation (it evicts) nor @defer or @stream (a hit would answer in one part what was asked for in
 * several); stores and evicts at execution; serves stale at result.
 */
export function responseCachePlugin(
  settings: ResponseCacheSettings,
  schema: GraphQLSchema,
  cache: GatewayCache,
): ResponseCacheSteps {
  // Neither parts, nor a live query's results (its loaders learn what it watches), nor a subscription's events.
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
    ttl: settings.ttlMs,
    ttlPerSchemaCoordinate: { 'Query.__schema': 0, 'Query.__type': 0, ...ttlPerTypeOf(schema, settings.ttlPerType) },
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
      return { onExecuteDone: ({ result }) => (isAsyncIterable(result) ? undefined : cache.alsoHolds(result, types)) };
    },
  };
  return {
    name: 'response cache',
    admission(operation) {
      if (operation.definition?.operation !== 'query' || !keeps(operation)) return undefined;
      const { params, request } = operation;
      const key = responseCacheKey(params.query!, params.operationName, params.variables, request.tokenCaller ?? null);
      operation.cacheKey = key;
      const hit = (answer: CachedAnswer | undefined): undefined => {
        if (answer?.result.data == null) return;
        operation.result = answer.result;
        operation.cached = answer;
        cacheableFrom(operation, freshFor(answer.result.data, answer.expiresAt - Date.now()));
      };
      const looked = cache.lookup(key, request.caller.address);
      return isPromise(looked) ? looked.then(hit) : hit(looked);
    },
    envelop: [evictions, library],
    result: (operation) => afterExecution(operation, cache, settings.staleIfErrorMs),
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

/** What an operation's answer says to HTTP caches, unless it is a batch's (its operations share one response). */
function cacheableFrom({ request }: OperationState, cacheable: Cacheable): void {
  request.cacheable = request.batched ? false : cacheable;
}

/** The result stage's step: a failed read served stale, the TTL of an answer kept now, a mutation's evictions. */
function afterExecution(
  operation: OperationState,
  cache: GatewayCache,
  staleIfErrorMs: number,
): Promise<void> | undefined {
  const { result, cacheKey: key } = operation;
  if (result === undefined || isAsyncIterable(result)) return undefined;
  const fault =
    staleIfErrorMs > 0 && key !== undefined && operation.cached === undefined ? upstreamFaultOf(result) : undefined;
  if (fault !== undefined) {
    // This caller's answer (the key holds the caller), expired less than RESPONSE_CACHE_STALE_IF_ERROR_MS ago.
    const serve = (kept: CachedAnswer | undefined): undefined => {
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
    return isPromise(kept) ? kept.then(serve) : serve(kept);
  }
  if (operation.cached === undefined) {
    // Kept by the library: it worked its TTL out (`onTtl`), and keeps an answer without errors for a TTL above 0.
    const ttl = operation.cacheTtl ?? 0;
    cacheableFrom(
      operation,
      ttl > 0 && !result.errors?.length && result.data != null ? freshFor(result.data, ttl) : false,
    );
  }
  // What the mutation may have changed (not if refused before its upstream call, or answered 4xx), and the answers
  // holding a head a read found gone (404), as its deletion's would (never served stale again).
  const evictions = [
    ...changedFields(operation.evictions ?? [], result).flatMap((field) => field.records),
    ...goneHeadRecords(operation.context?.loaders.heads.gone() ?? []),
  ];
  const evicting = evictions.length === 0 ? undefined : cache.evict(evictions);
  // A mutation's answer waits for the library's evictions of the objects it returned too; a query's for none.
  const settled = operation.definition?.operation === 'mutation' ? cache.settled() : undefined;
  if (evicting === undefined) return settled;
  return settled === undefined ? evicting : Promise.all([evicting, settled]).then(() => undefined);
}

/**
 * RESPONSE_CACHE_TTL_PER_TYPE as the schema reads it: a type's TTL also bounds edges whose `node` is one and
 * connections whose `nodes` or `edges` hold them, so `permissions { totalCount }` lives no longer than a Permission.
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
 * The response cache's store, over Redis alone with REDIS_URL (what another replica wrote must be read here), else
 * memory: one per process, whatever the schemas served (a change made through one endpoint evicts for every one).
 */
export function responseCacheOf(
  settings: ResponseCacheSettings,
  operationTimeoutMs: number,
  metrics: GatewayMetrics,
  redis: SharedRedis | undefined,
): GatewayCache {
  // How long a miss waits for its answer at most: the operation's deadline, with room.
  const answerWithinMs = 2 * operationTimeoutMs;
  const { bounds, maxEntryBytes, ttlMs, staleIfErrorMs } = settings;
  const overBudget = metrics.responseCacheOverBudget;
  if (redis === undefined) {
    const store = createMemoryResponseCache(bounds, maxEntryBytes, { overBudget, keepExpiredMs: staleIfErrorMs });
    return new ResponseCache(store, metrics.watchResponseCache(store.use), answerWithinMs);
  }
  const store = createRedisResponseCache({
    redis,
    maxTtlMs: Math.max(ttlMs, ...Object.values(settings.ttlPerType)),
    keepExpiredMs: staleIfErrorMs,
    maxEntryBytes,
    raceWindowMs: answerWithinMs,
    budget: bounds,
    overBudget,
  });
  return new ResponseCache(store, metrics.watchResponseCache(undefined), answerWithinMs);
}
