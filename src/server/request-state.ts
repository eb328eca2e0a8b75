import type { Context, Span } from '@opentelemetry/api';
import type { DocumentNode } from 'graphql';
import type { Cache } from '@graphql-yoga/plugin-response-cache';
import type { Plugin } from 'graphql-yoga';
import type { RateLimiterRes } from 'rate-limiter-flexible';
import { RequestBatch } from '../loaders/request-batch.js';
import { requestIdFrom } from '../schema/context.js';
import type { ClientIdentity } from './instruments/client-awareness.js';
import { callerFrom, tokenCallerOf, type ArrivingRequest, type Caller } from './callers.js';
import { pathOf, servedAsGraphQL } from './http/paths.js';

/*
 * What the plugins know of a request and of each of its operations, in two typed objects made
 * once each: the request's on yoga's server context (`requestState`), an operation's on its
 * context (`operationState`). A batch's operations each have a context of their own whose
 * prototype is the server context (yoga's `Object.create(serverContext)`), so every operation
 * reads its request's state; a single operation's context is the server context itself. This
 * file is the one list of what passes between plugins: a field here says who writes it and who
 * reads it.
 */

/** What an answer holds, as envelop's response cache names it: `Type:id`, or a whole type without an id. */
export type CacheEntityRecord = Parameters<Cache['invalidate']>[0] extends Iterable<infer T> ? T : never;

export type { Caller };

/** What the Accept header lets the gateway answer in (answers/negotiation.ts). */
export interface Negotiated {
  /** The media types, most preferred first. */
  readonly types: readonly string[];
  /** Whether its parts, in multipart/mixed, are in graphql-js 17.0.0-alpha.9's format. */
  readonly alpha9: boolean;
}

/**
 * What an answer may say to HTTP caches (response-cache/plugin.ts): seconds left and its tag, or
 * not cacheable; `stale` for an answer kept past its TTL served for a read that failed.
 */
export type Cacheable = { readonly maxAge: number; readonly tag: string; readonly stale?: { readonly expiredSeconds: number } } | false;

/** An APQ registration waiting for its document to validate (documents/persisted-documents.ts). */
export interface Registration {
  readonly hash: string;
  readonly query: string;
}

export type OperationType = 'query' | 'mutation' | 'unknown';

/** What the operation's span, log line and metrics say of it (telemetry/operation-telemetry.ts). */
export interface OperationRecord {
  readonly startedAt: number;
  /** The operationName the client sent, until the parsed document names the operation. */
  name: string | undefined;
  type: OperationType;
  done: boolean;
  /** The operation's span, a child of the caller's span when its request carries a traceparent. */
  readonly span: Span;
  /** The context naming `span` as the parent: the plan's and the upstream calls' spans hang under it. */
  readonly trace: Context;
}

/** One GraphQL operation: made in onParams (a batch has one per entry), read by every plugin after. */
export class OperationState {
  /** Its span, log line and metrics; set by the telemetry in onParams. */
  record: OperationRecord | undefined;
  /** Counted in flight (traffic/in-flight.ts) until its answer is out, or its last part. */
  inFlight = false;
  /** Its answer is a stream of parts: the response going out is not its end. */
  streaming = false;
  /** The caller whose in-flight slot it holds, given back once (traffic/caller-limits.ts). */
  slot: string | undefined;
  /** Its TTL in the response cache, as the cache plugin computed it. */
  cacheTtl: number | undefined;
  /** Its key in the response cache: set for a query the cache looked up (never a mutation). */
  cacheKey: string | undefined;
  /** Whether its document asks for incremental delivery (@defer/@stream): never kept in the response cache. */
  incremental = false;
  /** What a mutation's fields evict from the response cache, beyond the objects they return, if their outcome says they may have changed it. */
  evictions: readonly FieldEvictions[] | undefined;
  /** An APQ registration waiting for validation, then its write under way. */
  registration: Registration | undefined;
  registering: Promise<void> | undefined;
}

/** What one mutation field (its response key) evicts from the response cache when it may have changed something. */
export interface FieldEvictions {
  readonly key: string;
  readonly records: readonly CacheEntityRecord[];
}

/** What validating a request's documents costs so far, each distinct document counted once. */
export interface ValidationSpent {
  pairs: number;
  readonly documents: Set<DocumentNode>;
}

/** One request to the GraphQL endpoint: made in onRequest, before any other plugin looks at it. */
export class RequestState {
  readonly startedAt = performance.now();
  /** The operations seen so far (a batch has several). */
  readonly operations: OperationState[] = [];
  /** Shedding's count of operations this request holds in flight (traffic/in-flight.ts). */
  held = 0;
  /** The body was a JSON array (intake/batching.ts): its answer is an array too. */
  batched = false;
  /** A batch of two or more: the loaders, the call budget and the answer bytes its operations share. */
  batch: RequestBatch | undefined;
  /** What the Accept header allows; undefined without one (anything). */
  negotiated: Negotiated | undefined;
  /** Whom its operations are charged to (`callerOf`): load shedding's shares and the caller limits. */
  caller: Caller | undefined;
  /** What the limiters last said of its operations, for the RateLimit headers (traffic/rate-limit-headers.ts). */
  readonly quotas: { requests?: RateLimiterRes; address?: RateLimiterRes } = {};
  /** The caller's trace (its traceparent) and client app, read by the telemetry in onRequest. */
  parent: Context | undefined;
  client: ClientIdentity | undefined;
  /** What its answer may say to HTTP caches; set by the response cache, read as the headers are written. */
  cacheable: Cacheable | undefined;
  #validationSpent: ValidationSpent | undefined;
  #requestId: string | undefined;
  #tokenCaller: string | null | undefined;

  constructor(readonly request: Request) {}

  /** What validating its documents costs so far (guards/fragment-pairs.ts): a batch's documents share one budget. Made on first use. */
  get validationSpent(): ValidationSpent {
    return (this.#validationSpent ??= { pairs: 0, documents: new Set() });
  }

  /** The caller its Authorization header names (callers.ts), hashed once: the caller limits and the response cache's scope read it. */
  get tokenCaller(): string | undefined {
    // Known already with its caller (the HTTP server's or the lane's, on a lane miss): not hashed again.
    if (this.caller !== undefined) return this.caller.token;
    if (this.#tokenCaller === undefined) this.#tokenCaller = tokenCallerOf(this.request.headers.get('authorization') ?? undefined) ?? null;
    return this.#tokenCaller ?? undefined;
  }

  /**
   * Whom its operations are charged to, worked out once: as the HTTP server did before yoga
   * (`req` is the Node request it came on), else from its headers (the gateway driven through
   * `yoga.fetch` has no client address).
   */
  callerOf(req: ArrivingRequest | undefined, trustProxy: boolean): Caller {
    return (this.caller ??= req?.callerOnArrival ?? callerFrom(this.tokenCaller, this.request.headers.get('x-forwarded-for') ?? undefined, req?.socket?.remoteAddress, trustProxy));
  }

  /** The id its log lines, upstream calls and answer carry: the incoming `x-request-id` when sane, else made once. */
  get requestId(): string {
    return (this.#requestId ??= requestIdFrom(this.request));
  }

  startBatch(): void {
    this.batch = new RequestBatch(this.request.signal);
  }
}

/** yoga's server context and operation contexts, as the plugins see them. */
export interface WithState {
  requestState?: RequestState;
  operationState?: OperationState;
}

/** The request's state (on the server context, or an operation context inheriting from it). */
export const requestStateOf = (context: unknown): RequestState | undefined => (context as WithState).requestState;

/** The operation's state, on its own context. */
export const operationStateOf = (context: unknown): OperationState | undefined => (context as WithState).operationState;

/**
 * Makes the states: a request's in onRequest, for a request yoga serves as GraphQL (the probes and
 * pages have none), and an operation's in onParams. First in the pipeline: every later hook finds them.
 */
export function useRequestState(): Plugin {
  let endpoint = '/graphql';
  return {
    onYogaInit({ yoga }) {
      endpoint = yoga.graphqlEndpoint;
    },
    onRequest({ request, serverContext }) {
      const { url } = request;
      if (url.endsWith(endpoint) || servedAsGraphQL(url, pathOf(url), endpoint)) (serverContext as WithState).requestState = new RequestState(request);
    },
    onParams({ context }) {
      const request = (context as WithState).requestState;
      if (request === undefined) return;
      const operation = new OperationState();
      (context as WithState).operationState = operation;
      request.operations.push(operation);
    },
  };
}
