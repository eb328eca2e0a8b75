import { createHash } from 'node:crypto';
import { encodeGlobalID } from '@pothos/plugin-relay';
import stableStringify from 'fast-json-stable-stringify';
import { collectFields } from '@graphql-tools/utils';
import { useResponseCache } from '@graphql-yoga/plugin-response-cache';
import { getArgumentValues, getNamedType, getOperationAST, getVariableValues, isObjectType, Kind, TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type ExecutionArgs, type FragmentDefinitionNode, type GraphQLSchema } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import { headIdFrom } from '../../domain/ids.js';
import type { ResponseCacheSettings } from '../../config.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { expiresAtKey, ResponseCache, type CacheEntityRecord, type GatewayCache } from './cache.js';
import { createMemoryResponseCache } from './memory-store.js';
import { createRedisResponseCache } from './redis-store.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import { varyOn } from '../answers/private-answers.js';
import { isBatch } from '../intake/batching.js';
import { composed } from '../plugin-kit/composed.js';
import { tokenCallerOf } from '../traffic/caller-limits.js';

export interface GatewayResponseCacheOptions {
  readonly cache: GatewayCache;
  /** RESPONSE_CACHE_TTL_MS */
  readonly ttlMs: number;
  /** RESPONSE_CACHE_TTL_PER_TYPE: object type names and their TTL in ms. */
  readonly ttlPerType: Readonly<Record<string, number>>;
}

const ttlKey = Symbol('response-cache.ttl');
const incrementalKey = Symbol('response-cache.incremental');
const evictionsKey = Symbol('response-cache.evictions');

/** An operation's state, on its context. */
type CacheState = { [ttlKey]?: number; [incrementalKey]?: boolean; [evictionsKey]?: CacheEntityRecord[] };

/** A listing's answer changes with a head it does not hold (its `totalCount`, a search a new name enters): every cached listing goes with a head. */
const headListings: CacheEntityRecord = { typename: 'HeadConnection' };

/**
 * What a mutation changes beyond the objects it returns, by its arguments (so whether the client
 * selected them does not matter): `updateHead` and `deleteHead` the head they name
 * (`Head:<global ID>`, as answers hold it) and every head listing. `deleteHead` returns no Head
 * for the plugin to find; `updateSubscription` returns the subscription, which the plugin finds.
 */
function evictionsOf(args: ExecutionArgs): CacheEntityRecord[] {
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
  const evictions: CacheEntityRecord[] = [];
  const { fields } = collectFields(args.schema, fragments, variables, mutationType, operation.selectionSet);
  for (const [node] of fields.values()) {
    const field = node === undefined ? undefined : mutationType.getFields()[node.name.value];
    if (node === undefined || (field?.name !== 'updateHead' && field?.name !== 'deleteHead')) continue;
    let input: { id?: unknown } | undefined;
    try {
      input = getArgumentValues(field, node, variables)['input'] as { id?: unknown } | undefined;
    } catch {
      // Arguments that do not coerce fail the mutation too: nothing changes.
      continue;
    }
    const uuid = headIdFrom(input?.id);
    if (uuid !== undefined) evictions.push({ typename: 'Head', id: encodeGlobalID('Head', uuid) });
    evictions.push(headListings);
  }
  return evictions;
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
function tagOf(data: object): string {
  let tag = tags.get(data);
  if (tag === undefined) tags.set(data, (tag = `W/"${createHash('sha256').update(JSON.stringify(data)).digest('base64url')}"`));
  return tag;
}

/** Whether an `If-None-Match` names `tag`, by weak comparison (RFC 9110 13.1.2), or is `*`. */
function names(ifNoneMatch: string, tag: string): boolean {
  const opaque = tag.slice(2);
  return ifNoneMatch.split(',').some((entry) => {
    const candidate = entry.trim();
    return candidate === '*' || candidate === opaque || candidate.replace(/^W\//, '') === opaque;
  });
}

/** What a request's answer may say to HTTP caches: seconds left and its tag, or not cacheable. */
type Cacheable = { readonly maxAge: number; readonly tag: string } | false;

/**
 * The key an answer is kept under: the query text, the operation name, the variables (sorted) and
 * the caller's session, hashed by node:crypto (the plugin's default hashes with WebCrypto's
 * asynchronous digest: a fifth of a hit's CPU, and a trip through the thread pool).
 */
export function responseCacheKey(documentString: string, operationName: string | null | undefined, variables: unknown, sessionId: string | null | undefined): string {
  return createHash('sha256').update(`${documentString}|${operationName ?? ''}|${stableStringify(variables ?? {})}|${sessionId ?? ''}`).digest('hex');
}

/** `Cache-Control` of a cacheable answer: what is left of its entry, in whole seconds. */
const cacheControl = (request: Request, maxAgeSeconds: number) => `${request.headers.has('authorization') ? 'private' : 'public'}, max-age=${maxAgeSeconds}`;

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
 *   included), `Cache-Control: private|public, max-age=<seconds left>` and
 *   `Vary: Authorization, Accept`.
 */
export function useGatewayResponseCache(options: GatewayResponseCacheOptions): Plugin {
  const { cache } = options;
  const cacheable = new WeakMap<Request, Cacheable>();
  // yoga's plugin answers 304 in its onRequest, to any request naming any kept key: not used (onResultProcess below).
  const { onRequest: _yogaRevalidation, ...yogaCache } = useResponseCache<Record<string, unknown>>({
    cache,
    session: (request) => tokenCallerOf(request.headers.get('authorization') ?? undefined) ?? null,
    buildResponseCacheKey: ({ documentString, operationName, variableValues, sessionId }) => responseCacheKey(documentString, operationName, variableValues, sessionId),
    enabled: (_request, context) => (context as CacheState)[incrementalKey] !== true,
    ttl: options.ttlMs,
    ttlPerSchemaCoordinate: { 'Query.__schema': 0, 'Query.__type': 0, ...options.ttlPerType },
    onTtl: ({ ttl, context }) => ((context as CacheState)[ttlKey] = ttl),
    includeExtensionMetadata: false,
  }) as Plugin;
  void _yogaRevalidation;

  const hooks: Plugin = {
    onExecute({ args }) {
      const state = args.contextValue as CacheState;
      const query = (args.contextValue as { params?: { query?: unknown } }).params?.query;
      // The text, not args.document: a client that takes one JSON answer runs the document without them (answer-types.ts).
      if (typeof query === 'string' && /@(defer|stream)\b/.test(query)) state[incrementalKey] = true;
      const evictions = evictionsOf(args);
      if (evictions.length > 0) state[evictionsKey] = evictions;
      const types = evictions.length > 0 ? [] : typesWithoutIds(args.schema, args.document);
      if (types.length === 0) return undefined;
      // Before the plugin's own onExecuteDone, which stores the answer (this plugin comes first).
      return { onExecuteDone: ({ result }) => void (isAsyncIterable(result) ? undefined : cache.alsoHolds(result, types)) };
    },
    onExecutionResult({ request, context, result, setResult }) {
      const state = context as CacheState;
      let answer: Cacheable = false;
      if (result !== undefined && !Array.isArray(result) && !isAsyncIterable(result)) {
        const http = (result.extensions as HttpHeaders | undefined)?.http;
        // The plugin's ETag is the cache key, the same whatever the answer holds now: not a validator of it.
        if (http !== undefined) setResult({ ...result, extensions: withoutHttp(result.extensions!) });
        if (result.errors === undefined && result.data != null) {
          const expiresAt = (result as { [expiresAtKey]?: number })[expiresAtKey];
          const ttl = state[ttlKey] ?? 0;
          // A hit says what is left of its entry; an answer just kept (the plugin tagged it), its TTL.
          const maxAge = expiresAt !== undefined ? Math.max(0, Math.floor((expiresAt - Date.now()) / 1000)) : http?.headers?.['ETag'] !== undefined && ttl > 0 ? Math.floor(ttl / 1000) : undefined;
          if (maxAge !== undefined) answer = { maxAge, tag: tagOf(result.data) };
        }
      }
      // The operations of a batch share one response: it says nothing of their entries.
      cacheable.set(request, isBatch(request) || cacheable.has(request) ? false : answer);
      // After the mutation's upstream call, before its answer: a read that follows it finds no stale answer.
      const evictions = state[evictionsKey];
      const evicting = evictions === undefined ? undefined : cache.evict(evictions);
      const settled = cache.settled();
      if (evicting === undefined) return settled;
      return settled === undefined ? evicting : Promise.all([evicting, settled]).then(() => undefined);
    },
    // Revalidation: a GET whose If-None-Match names this answer's tag gets 304 and no body. Decided
    // on the answer itself (a hit, or the operation run again), so a tag only ever matches the
    // answer it was made from, for this request's query, variables and caller.
    onResultProcess({ request, setResultProcessor }) {
      const answer = cacheable.get(request);
      if (!answer || (request.method !== 'GET' && request.method !== 'HEAD')) return;
      const ifNoneMatch = request.headers.get('if-none-match');
      if (ifNoneMatch === null || !names(ifNoneMatch, answer.tag)) return;
      setResultProcessor((_result, fetchAPI) => new fetchAPI.Response(null, { status: 304 }), 'application/json');
    },
    onResponse({ request, response }) {
      const answer = cacheable.get(request);
      if (!answer) return;
      // Only a JSON answer: the same operation as multipart/mixed or an event stream is another body.
      const type = response.headers.get('content-type') ?? '';
      if (response.status !== 304 && !(response.status === 200 && /^application\/(graphql-response\+)?json\b/.test(type))) return;
      response.headers.set('etag', answer.tag);
      response.headers.set('cache-control', cacheControl(request, answer.maxAge));
      response.headers.set('vary', varyOn(varyOn(response.headers.get('vary'), 'Authorization'), 'Accept'));
    },
  };
  return composed([hooks, yogaCache]);
}

/**
 * The response cache over its store: with REDIS_URL, Redis alone, shared by every process and
 * replica (no copy in this process's memory in front of it: a write through another replica
 * must be seen by the next read here); else this process's memory, bounded by `settings.memory`,
 * whose entries and bytes the gauges show. Its events are counted in `metrics`.
 */
export function responseCachePlugin(settings: ResponseCacheSettings, operationTimeoutMs: number, metrics: GatewayMetrics, redis: SharedRedis | undefined): Plugin {
  // How long a miss waits for its answer at most: the operation's deadline, with room.
  const answerWithinMs = 2 * operationTimeoutMs;
  let cache: GatewayCache;
  if (redis === undefined) {
    const store = createMemoryResponseCache(settings.memory, settings.maxEntryBytes);
    cache = new ResponseCache(store, metrics.watchResponseCache(store.use), answerWithinMs);
  } else {
    const maxTtlMs = Math.max(settings.ttlMs, ...Object.values(settings.ttlPerType));
    const store = createRedisResponseCache({ redis, maxTtlMs, maxEntryBytes: settings.maxEntryBytes, raceWindowMs: answerWithinMs });
    cache = new ResponseCache(store, metrics.watchResponseCache(undefined), answerWithinMs);
  }
  return useGatewayResponseCache({ cache, ttlMs: settings.ttlMs, ttlPerType: settings.ttlPerType });
}
