import { createHash } from 'node:crypto';
import { encodeGlobalID } from '@pothos/plugin-relay';
import stableStringify from 'fast-json-stable-stringify';
import { collectFields } from '@graphql-tools/utils';
import { useResponseCache } from '@graphql-yoga/plugin-response-cache';
import { getArgumentValues, getNamedType, getOperationAST, getVariableValues, isObjectType, Kind, TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type ExecutionArgs, type ExecutionResult, type FragmentDefinitionNode, type GraphQLError, type GraphQLObjectType, type GraphQLSchema } from 'graphql';
import { isAsyncIterable, isPromise, type Plugin } from 'graphql-yoga';
import { headIdFrom } from '../../domain/ids.js';
import { factsOf } from '../../plan/facts.js';
import type { ResponseCacheSettings } from '../../config.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import { expiresAtKey, ResponseCache, type CacheEntityRecord, type CachedAnswer, type GatewayCache } from './cache.js';
import { createMemoryResponseCache } from './memory-store.js';
import { createRedisResponseCache } from './redis-store.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import fresh from 'fresh';
import { tokenCallerOf } from '../callers.js';
import { composed } from '../plugin-kit/composed.js';
import { operationStateOf, requestStateOf, type Cacheable, type FieldEvictions } from '../request-state.js';

export interface GatewayResponseCacheOptions {
  readonly cache: GatewayCache;
  /** RESPONSE_CACHE_TTL_MS */
  readonly ttlMs: number;
  /** RESPONSE_CACHE_TTL_PER_TYPE: object type names and their TTL in ms. */
  readonly ttlPerType: Readonly<Record<string, number>>;
  /** RESPONSE_CACHE_STALE_IF_ERROR_MS: whether a read that fails is answered with its kept answer past its TTL (0: never). */
  readonly staleIfErrorMs: number;
}

/** The codes of an upstream fault: what a stale answer may stand in for (never a refusal or an answer of the upstream's). */
const faultCodes = new Set(['UPSTREAM_UNAVAILABLE', 'UPSTREAM_TIMEOUT', 'UPSTREAM_ERROR']);

/**
 * The fault a read's answer failed with, if every one of its errors is an upstream fault (the
 * breaker's refusal, no connection, a timeout, a 5xx or an answer it could not read): a stale
 * answer may stand in for it. Undefined for an answer without errors, or with any other error (a
 * 404, a refused input, a limit): that is an answer, not a failure.
 */
function upstreamFaultOf(result: ExecutionResult): string | undefined {
  const codes = (result.errors ?? []).map((error) => {
    const status = upstreamStatusOf(error);
    return status !== undefined && status < 500 ? undefined : error.extensions.code;
  });
  return codes.length > 0 && codes.every((code) => typeof code === 'string' && faultCodes.has(code)) ? (codes[0] as string) : undefined;
}

/**
 * What a mutation changes beyond the objects it returns, as its field declares it (`changes`,
 * plan/facts.ts), by its arguments (so whether the client selected anything does not matter):
 * `updateHead` and `deleteHead` the head they name (`Head:<global ID>`, as answers hold it) and
 * every head listing, and `updateHead` with a hair (`hairId`, `hairColor`) every answer holding a
 * hair. `deleteHead` returns no Head for the plugin to find; `updateSubscription`
 * returns the subscription, which the plugin finds. By response key: whether each is done depends
 * on its field's outcome (`evictionsAfter`).
 */
function evictionsOf(args: ExecutionArgs): FieldEvictions[] {
  const operation = getOperationAST(args.document, args.operationName);
  const mutationType = args.schema.getMutationType();
  if (operation?.operation !== 'mutation' || mutationType == null) return [];
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const definition of args.document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  // The variables as execution sees them: their defaults filled in (args.variableValues is what the client sent).
  const coerced = getVariableValues(args.schema, operation.variableDefinitions ?? [], args.variableValues ?? {});
  // Variables that do not coerce fail the mutation too: nothing changes.
  if (coerced.errors !== undefined) return [];
  const variables = coerced.coerced;
  const evictions: FieldEvictions[] = [];
  const { fields } = collectFields(args.schema, fragments, variables, mutationType, operation.selectionSet);
  for (const [key, [node]] of fields) {
    const field = node === undefined ? undefined : mutationType.getFields()[node.name.value];
    const changes = field === undefined ? undefined : factsOf(field).changes;
    if (node === undefined || field === undefined || changes === undefined) continue;
    const records: CacheEntityRecord[] = [];
    if (changes.head !== undefined) {
      let input: { id?: unknown } | undefined;
      try {
        input = getArgumentValues(field, node, variables)[changes.head] as { id?: unknown } | undefined;
      } catch {
        // Arguments that do not coerce fail the mutation too: nothing changes.
        continue;
      }
      const uuid = headIdFrom(input?.id);
      if (uuid !== undefined) records.push({ typename: 'Head', id: encodeGlobalID('Head', uuid) });
      for (const [name, types] of Object.entries(changes.given ?? {})) {
        if ((input as Record<string, unknown> | undefined)?.[name] !== undefined) for (const typename of types) records.push({ typename });
      }
    }
    for (const typename of changes.types ?? []) records.push({ typename });
    if (records.length > 0) evictions.push({ key, records });
  }
  return evictions;
}

/**
 * Whether a mutation field may have changed what it names, by its error (none: it succeeded). It
 * may have when the upstream took the change: a success, an answer lost after sending
 * (`UPSTREAM_OUTCOME_UNKNOWN`), a 5xx (the upstream may have applied it before failing) or a 2xx
 * it could not read. It has not when it was refused before sending (the gateway's own checks, a
 * limit, an open breaker: no upstream status) or answered 4xx.
 */
function mayHaveChanged(error: GraphQLError | undefined): boolean {
  if (error === undefined) return true;
  const code = error.extensions.code ?? (error.originalError as { code?: unknown } | undefined)?.code;
  if (code === 'UPSTREAM_OUTCOME_UNKNOWN') return true;
  const status = upstreamStatusOf(error);
  return status !== undefined && (status < 400 || status >= 500);
}

/** The HTTP status the upstream answered a field's call with, as its error says (schema/errors.ts), if it answered. */
function upstreamStatusOf(error: GraphQLError): number | undefined {
  const status = (error.extensions.upstream as { status?: unknown } | undefined)?.status ?? (error.originalError as { status?: unknown } | undefined)?.status;
  return typeof status === 'number' ? status : undefined;
}

/** The evictions of the mutation fields that may have changed something, by their outcome in `result`. */
function evictionsAfter(fields: readonly FieldEvictions[], result: ExecutionResult | undefined): CacheEntityRecord[] {
  // A field's own error (its path that field alone) is its outcome; one below it (a read of what
  // it answered) says the field itself resolved: it changed what it names.
  const errors = new Map<unknown, GraphQLError>();
  for (const error of result?.errors ?? []) if (error.path?.length === 1 && !errors.has(error.path[0])) errors.set(error.path[0], error);
  // An error of no field (a refusal of the whole operation) changed nothing.
  if (result === undefined || result.errors?.some((error) => error.path === undefined)) return [];
  return fields.filter((field) => mayHaveChanged(errors.get(field.key))).flatMap((field) => field.records);
}

const idlessTypes = new WeakMap<DocumentNode, readonly CacheEntityRecord[]>();

/**
 * The object types without an `id` an operation selects (a connection, its edges, its page
 * info), each as a whole type (kept per document): the plugin reports only objects with an id, so
 * without these an answer such as `heads { totalCount }` could not be evicted with its listing.
 */
function typesWithoutIds(schema: GraphQLSchema, document: DocumentNode): readonly CacheEntityRecord[] {
  let types = idlessTypes.get(document);
  if (types === undefined) {
    const names = new Set<string>();
    const typeInfo = new TypeInfo(schema);
    visit(
      document,
      visitWithTypeInfo(typeInfo, {
        Field() {
          const type = getNamedType(typeInfo.getType());
          if (isObjectType(type) && type.getFields()['id'] === undefined && type !== schema.getQueryType()) names.add(type.name);
        },
      }),
    );
    idlessTypes.set(document, (types = [...names].map((typename) => ({ typename }))));
  }
  return types;
}

/**
 * An answer's entity tag: a SHA-256 of its data (weak: the same data compressed or not, as JSON
 * or as graphql-response+json, is the same to a client). Made once per data object: hits from
 * process memory share theirs.
 */
const tags = new WeakMap<object, string>();
export function tagOf(data: object): string {
  let tag = tags.get(data);
  if (tag === undefined) tags.set(data, (tag = `W/"${createHash('sha256').update(JSON.stringify(data)).digest('base64url')}"`));
  return tag;
}

/**
 * The key an answer is kept under, `<scope>:<hash>`: the scope names the caller (the last 16
 * characters of its session, or `public`), which the stores' byte bounds charge (`scopeOfKey`); the
 * hash is of the query text, the operation name, the variables (sorted) and the session, by
 * node:crypto (the plugin's default hashes with WebCrypto's asynchronous digest: a fifth of a
 * hit's CPU, and a trip through the thread pool).
 */
export function responseCacheKey(documentString: string, operationName: string | null | undefined, variables: unknown, sessionId: string | null | undefined): string {
  // The session is a hash of the credential already (`token:<SHA-256, base64url>`): 16 of its characters name the scope.
  const scope = sessionId == null ? 'public' : sessionId.slice(-16);
  return `${scope}:${createHash('sha256').update(`${documentString}|${operationName ?? ''}|${stableStringify(variables ?? {})}|${sessionId ?? ''}`).digest('hex')}`;
}

type HttpHeaders = { http?: { headers?: Record<string, string> } };

function withoutHttp(extensions: Record<string, unknown>): Record<string, unknown> | undefined {
  const { http: _http, ...rest } = extensions;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/**
 * The response cache (yoga's plugin over @envelop/response-cache), as the gateway runs it:
 * - scope: a hash of the normalised Authorization credential (the caller limits' key), or one
 *   public scope without one; the key is computed in onParams, so this plugin comes after the
 *   persisted documents (the key sees the query text) and before the caller limits (whose
 *   refusal then replaces a hit);
 * - never cached: mutations (they invalidate), answers with errors (partial ones too),
 *   introspection, operations with @defer or @stream (a hit would answer in one part what the
 *   client asked for in several, or the other way round);
 * - a mutation's evictions (the objects it returns, and `evictionsOf`) are done before its
 *   answer is sent, for every caller;
 * - HTTP, on a cacheable JSON answer (not a batch's): a weak ETag made from its data, and 304 with
 *   no body for a GET whose `If-None-Match` names it (decided on the answer itself, a hit when it
 *   is kept: yoga's plugin answered 304 to any request naming any kept key, a POST mutation
 *   included); what it says is on the request's state (`cacheable`), and the one writer of cache
 *   headers (answers/answer-headers.ts) writes `ETag`, `Cache-Control: private|public,
 *   max-age=<seconds left>` and `Vary: Authorization, Accept`.
 */
export function useGatewayResponseCache(options: GatewayResponseCacheOptions): Plugin {
  const { cache } = options;
  // yoga's plugin answers 304 in its onRequest, to any request naming any kept key: not used (onResultProcess below).
  const { onRequest: _yogaRevalidation, ...yogaCache } = useResponseCache<Record<string, unknown>>({
    cache,
    session: (request, context) => (requestStateOf(context)?.tokenCaller ?? tokenCallerOf(request.headers.get('authorization') ?? undefined)) ?? null,
    // Called for queries only (a mutation's lookup is skipped): the key a failed read's stale answer is found by.
    buildResponseCacheKey: ({ documentString, operationName, variableValues, sessionId, context }) => {
      const key = responseCacheKey(documentString, operationName, variableValues, sessionId);
      const operation = operationStateOf(context);
      if (operation !== undefined) operation.cacheKey = key;
      return key;
    },
    // The one detector of @defer/@stream, on the document (documents/incremental-delivery.ts).
    enabled: (_request, context) => operationStateOf(context)?.incremental !== true,
    ttl: options.ttlMs,
    ttlPerSchemaCoordinate: { 'Query.__schema': 0, 'Query.__type': 0, ...options.ttlPerType },
    onTtl: ({ ttl, context }) => {
      const operation = operationStateOf(context);
      if (operation !== undefined) operation.cacheTtl = ttl;
      return ttl;
    },
    includeExtensionMetadata: false,
  }) as Plugin;
  void _yogaRevalidation;

  const hooks: Plugin = {
    onExecute({ args }) {
      const evictions = evictionsOf(args);
      const operation = operationStateOf(args.contextValue);
      if (evictions.length > 0 && operation !== undefined) operation.evictions = evictions;
      const types = evictions.length > 0 ? [] : typesWithoutIds(args.schema, args.document);
      if (types.length === 0) return undefined;
      // Before the plugin's own onExecuteDone, which stores the answer (this plugin comes first).
      return { onExecuteDone: ({ result }) => void (isAsyncIterable(result) ? undefined : cache.alsoHolds(result, types)) };
    },
    onExecutionResult({ context, result, setResult }) {
      const state = requestStateOf(context);
      const key = operationStateOf(context)?.cacheKey;
      const fault = options.staleIfErrorMs > 0 && key !== undefined && result !== undefined && !Array.isArray(result) && !isAsyncIterable(result) ? upstreamFaultOf(result) : undefined;
      if (fault !== undefined) {
        // A read that failed upstream: its answer kept for this caller (the key holds the caller), expired less than RESPONSE_CACHE_STALE_IF_ERROR_MS ago.
        const serve = (kept: CachedAnswer | undefined) => {
          if (kept?.result.data == null) return;
          // Kept again since its lookup (another request's answer) it is fresh: served as a hit.
          const left = kept.expiresAt - Date.now();
          const stale = left > 0 ? undefined : { reason: fault, expiredMs: -left };
          setResult({ data: kept.result.data, extensions: { ...kept.result.extensions, ...(stale === undefined ? {} : { stale }) } });
          if (state === undefined || state.batched) return;
          const tag = tagOf(kept.result.data);
          state.cacheable = stale === undefined ? { maxAge: Math.floor(left / 1000), tag } : { maxAge: 0, tag, stale: { expiredSeconds: Math.ceil(stale.expiredMs / 1000) } };
        };
        const kept = cache.stale(key!);
        return isPromise(kept) ? kept.then(serve) : serve(kept);
      }
      let answer: Cacheable = false;
      if (result !== undefined && !Array.isArray(result) && !isAsyncIterable(result)) {
        const http = (result.extensions as HttpHeaders | undefined)?.http;
        // The plugin's ETag is the cache key, the same whatever the answer holds now: not a validator of it.
        if (http !== undefined) setResult({ ...result, extensions: withoutHttp(result.extensions!) });
        if (result.errors === undefined && result.data != null) {
          const expiresAt = (result as { [expiresAtKey]?: number })[expiresAtKey];
          const ttl = operationStateOf(context)?.cacheTtl ?? 0;
          // A hit says what is left of its entry; an answer just kept (the plugin tagged it), its TTL.
          const maxAge = expiresAt !== undefined ? Math.max(0, Math.floor((expiresAt - Date.now()) / 1000)) : http?.headers?.['ETag'] !== undefined && ttl > 0 ? Math.floor(ttl / 1000) : undefined;
          if (maxAge !== undefined) answer = { maxAge, tag: tagOf(result.data) };
        }
      }
      // The operations of a batch share one response: it says nothing of their entries.
      if (state !== undefined) state.cacheable = state.batched || state.cacheable !== undefined ? false : answer;
      // After the mutation's upstream call, before its answer: a read that follows it finds no stale answer.
      // Only what the mutation may have changed: not when it was refused before its call, or answered 4xx.
      const fields = operationStateOf(context)?.evictions;
      const evictions = fields === undefined || isAsyncIterable(result) || Array.isArray(result) ? [] : evictionsAfter(fields, result);
      const evicting = evictions.length === 0 ? undefined : cache.evict(evictions);
      const settled = cache.settled();
      if (evicting === undefined) return settled;
      return settled === undefined ? evicting : Promise.all([evicting, settled]).then(() => undefined);
    },
    // Revalidation: a GET whose If-None-Match names this answer's tag gets 304 and no body. Decided
    // on the answer itself (a hit, or the operation run again), so a tag only ever matches the
    // answer it was made from, for this request's query, variables and caller. Its headers are
    // written with every answer's (answers/answer-headers.ts).
    onResultProcess({ request, serverContext, setResultProcessor }) {
      const answer = requestStateOf(serverContext)?.cacheable;
      if (!answer || (request.method !== 'GET' && request.method !== 'HEAD')) return;
      const ifNoneMatch = request.headers.get('if-none-match');
      if (ifNoneMatch === null || !fresh({ 'if-none-match': ifNoneMatch }, { etag: answer.tag })) return;
      setResultProcessor((_result, fetchAPI) => new fetchAPI.Response(null, { status: 304 }), 'application/json');
    },
  };
  return composed([hooks, yogaCache]);
}

/**
 * RESPONSE_CACHE_TTL_PER_TYPE as the schema reads it: a type's TTL holds for the lists of it too,
 * the edges whose `node` is one and the connections whose `nodes` or `edges` hold them (their
 * shortest TTL when they list several), so `permissions { totalCount }`, which holds no
 * Permission, is kept no longer than a Permission is (with `Permission=0`, never).
 */
export function ttlPerTypeOf(schema: GraphQLSchema, ttlPerType: Readonly<Record<string, number>>): Readonly<Record<string, number>> {
  const ttls = new Map(Object.entries(ttlPerType));
  const listed = (type: GraphQLObjectType, field: string) => {
    const found = type.getFields()[field];
    return found === undefined ? undefined : ttls.get(getNamedType(found.type).name);
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (const type of Object.values(schema.getTypeMap())) {
      if (!isObjectType(type) || type.name.startsWith('__')) continue;
      const inherited = [listed(type, 'node'), listed(type, 'nodes'), listed(type, 'edges')].filter((ttl) => ttl !== undefined);
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
export function responseCachePlugin(settings: ResponseCacheSettings, schema: GraphQLSchema, operationTimeoutMs: number, metrics: GatewayMetrics, redis: SharedRedis | undefined): { readonly plugin: Plugin; readonly cache: GatewayCache; readonly inMemory: boolean } {
  // How long a miss waits for its answer at most: the operation's deadline, with room.
  const answerWithinMs = 2 * operationTimeoutMs;
  let cache: GatewayCache;
  if (redis === undefined) {
    const store = createMemoryResponseCache(settings.bounds, settings.maxEntryBytes, { overBudget: metrics.responseCacheOverBudget, keepExpiredMs: settings.staleIfErrorMs });
    cache = new ResponseCache(store, metrics.watchResponseCache(store.use), answerWithinMs);
  } else {
    const maxTtlMs = Math.max(settings.ttlMs, ...Object.values(settings.ttlPerType));
    const store = createRedisResponseCache({ redis, maxTtlMs, keepExpiredMs: settings.staleIfErrorMs, maxEntryBytes: settings.maxEntryBytes, raceWindowMs: answerWithinMs, budget: settings.bounds, overBudget: metrics.responseCacheOverBudget });
    cache = new ResponseCache(store, metrics.watchResponseCache(undefined), answerWithinMs);
  }
  return { plugin: useGatewayResponseCache({ cache, ttlMs: settings.ttlMs, ttlPerType: ttlPerTypeOf(schema, settings.ttlPerType), staleIfErrorMs: settings.staleIfErrorMs }), cache, inMemory: redis === undefined };
}
