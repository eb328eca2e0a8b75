import { createHash } from 'node:crypto';
import { encodeGlobalID } from '@pothos/plugin-relay';
import stableStringify from 'fast-json-stable-stringify';
import { collectFields } from '@graphql-tools/utils';
import { useResponseCache } from '@graphql-yoga/plugin-response-cache';
import { getArgumentValues, getNamedType, getOperationAST, isObjectType, Kind, TypeInfo, visit, visitWithTypeInfo, type DocumentNode, type ExecutionArgs, type ExecutionResult, type FragmentDefinitionNode, type GraphQLSchema } from 'graphql';
import { isAsyncIterable, isPromise, type Plugin } from 'graphql-yoga';
import { headIdFrom } from '../../domain/ids.js';
import type { ResponseCacheSettings } from '../../config.js';
import type { GatewayMetrics } from '../metrics.js';
import { expiresAtKey, ResponseCache, type CacheEntityRecord, type GatewayCache } from '../response-cache.js';
import { createMemoryResponseCache } from '../response-cache-memory.js';
import { createRedisResponseCache } from '../response-cache-redis.js';
import type { SharedRedis } from '../shared-state.js';
import { varyOn } from './private-answers.js';
import { composed } from './composed.js';
import { tokenCallerOf } from './caller-limits.js';

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
  const evictions: CacheEntityRecord[] = [];
  const { fields } = collectFields(args.schema, fragments, args.variableValues ?? {}, mutationType, operation.selectionSet);
  for (const [node] of fields.values()) {
    const field = node === undefined ? undefined : mutationType.getFields()[node.name.value];
    if (node === undefined || (field?.name !== 'updateHead' && field?.name !== 'deleteHead')) continue;
    let input: { id?: unknown } | undefined;
    try {
      input = getArgumentValues(field, node, args.variableValues ?? undefined)['input'] as { id?: unknown } | undefined;
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

/** An entity tag as the gateway writes it: the cache key (a SHA-256 in hex), quoted (RFC 9110 8.8.3). */
const KEY = /^[0-9a-f]{64}$/;
const quoted = (key: string) => `"${key}"`;

/**
 * The cache keys an `If-None-Match` names: its entity tags, weak or strong (a weak comparison is
 * what RFC 9110 asks of it), quoted or not (yoga's own tags were not), at most four of them;
 * anything else is no key of ours and is never looked up.
 */
function keysOf(ifNoneMatch: string): string[] {
  const keys: string[] = [];
  for (const tag of ifNoneMatch.split(',', 4)) {
    const key = tag.trim().replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
    if (KEY.test(key)) keys.push(key);
  }
  return keys;
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
 * - HTTP: an ETag (the cache key) on each cacheable answer, 304 for a matching `If-None-Match`
 *   before anything runs, `Cache-Control: private|public, max-age=<seconds left>` and
 *   `Vary: Authorization`.
 */
export function useGatewayResponseCache(options: GatewayResponseCacheOptions): Plugin {
  const { cache } = options;
  const cacheable = new WeakMap<Request, number | false>();
  let graphqlEndpoint = '/graphql';
  const { onRequest: _yogaRevalidation, ...yogaCache } = useResponseCache<Record<string, unknown>>({
    cache,
    session: (request) => tokenCallerOf(request.headers.get('authorization') ?? undefined) ?? null,
    // The plugin's own key, hashed by node:crypto at once: its default hashes with WebCrypto's
    // asynchronous digest, a fifth of a hit's CPU and a trip through the thread pool.
    buildResponseCacheKey: ({ documentString, operationName, variableValues, sessionId }) =>
      createHash('sha256').update(`${documentString}|${operationName ?? ''}|${stableStringify(variableValues ?? {})}|${sessionId ?? ''}`).digest('hex'),
    enabled: (_request, context) => (context as CacheState)[incrementalKey] !== true,
    ttl: options.ttlMs,
    ttlPerSchemaCoordinate: { 'Query.__schema': 0, 'Query.__type': 0, ...options.ttlPerType },
    onTtl: ({ ttl, context }) => ((context as CacheState)[ttlKey] = ttl),
    includeExtensionMetadata: false,
  }) as Plugin;
  void _yogaRevalidation;

  const hooks: Plugin = {
    onYogaInit({ yoga }) {
      graphqlEndpoint = yoga.graphqlEndpoint;
    },
    // yoga's plugin answers 304 here too, but without Cache-Control (the answer to a request with a token would then say no-store).
    onRequest({ request, url, fetchAPI, endResponse }) {
      const header = request.headers.get('if-none-match');
      if (header === null || url.pathname !== graphqlEndpoint) return undefined;
      // Browsers and HTTP caches send back one tag: the first key of ours is the one looked up.
      const tag = keysOf(header)[0];
      if (tag === undefined) return undefined;
      const found = cache.get(tag);
      const answer = (hit: ExecutionResult | null) => {
        const lastModified = (hit?.extensions as HttpHeaders | undefined)?.http?.headers?.['Last-Modified'];
        if (hit == null || lastModified === undefined) return;
        const since = request.headers.get('if-modified-since');
        if (since !== null && new Date(since).getTime() < new Date(lastModified).getTime()) return;
        const expiresAt = (hit as { [expiresAtKey]?: number })[expiresAtKey] ?? Date.now();
        endResponse(
          new fetchAPI.Response(null, {
            status: 304,
            headers: { etag: quoted(tag), 'last-modified': lastModified, 'cache-control': cacheControl(request, Math.max(0, Math.floor((expiresAt - Date.now()) / 1000))), vary: 'Authorization' },
          }),
        );
      };
      return isPromise(found) ? found.then(answer) : answer(found);
    },
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
      let maxAge: number | false = false;
      if (result !== undefined && !Array.isArray(result) && !isAsyncIterable(result) && result.errors === undefined) {
        const expiresAt = (result as { [expiresAtKey]?: number })[expiresAtKey];
        const tagged = (result.extensions as HttpHeaders | undefined)?.http?.headers?.['ETag'] !== undefined;
        if (expiresAt !== undefined) maxAge = Math.max(0, Math.floor((expiresAt - Date.now()) / 1000));
        else if (tagged && (state[ttlKey] ?? 0) > 0) maxAge = Math.floor(state[ttlKey]! / 1000);
        // yoga's plugin tags an answer it then does not keep (a TTL of 0: introspection, RESPONSE_CACHE_TTL_PER_TYPE): no ETag that matches nothing.
        else if (tagged) setResult({ ...result, extensions: withoutHttp(result.extensions!) });
      }
      // The operations of a batch share one response: it says nothing of their entries.
      cacheable.set(request, cacheable.has(request) ? false : maxAge);
      // After the mutation's upstream call, before its answer: a read that follows it finds no stale answer.
      const evictions = state[evictionsKey];
      const evicting = evictions === undefined ? undefined : cache.evict(evictions);
      const settled = cache.settled();
      if (evicting === undefined) return settled;
      return settled === undefined ? evicting : Promise.all([evicting, settled]).then(() => undefined);
    },
    onResponse({ request, response }) {
      // yoga's plugin writes the key as it is; an entity tag is quoted.
      const etag = response.headers.get('etag');
      if (etag !== null && KEY.test(etag)) response.headers.set('etag', quoted(etag));
      const maxAge = cacheable.get(request);
      if (maxAge === undefined || maxAge === false || response.status !== 200) return;
      response.headers.set('cache-control', cacheControl(request, maxAge));
      response.headers.set('vary', varyOn(response.headers.get('vary'), 'Authorization'));
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
