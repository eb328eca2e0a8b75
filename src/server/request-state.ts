import type { Cache } from '@envelop/response-cache';
import type { Context, Span } from '@opentelemetry/api';
import type { DocumentNode, ExecutionResult, GraphQLError } from 'graphql';
import type { RateLimiterRes } from 'rate-limiter-flexible';
import type { HeadChange } from '../domain/head-changes.js';
import { RequestBatch } from '../loaders/request-batch.js';
import { requestIdFrom } from '../schema/context.js';
import { type Caller, type CallerRules, callerFrom, tokenCallerOf } from './callers.js';
import type { HttpIncoming, Incoming, Negotiated, RequestHeaders, RequestLike, WholeAnswer } from './incoming.js';
import type { ClientIdentity } from './instruments/client-awareness.js';

/*
 * What the gateway knows of one request (`RequestState`) and of each of its operations (`OperationState`,
 * operation-state.ts): the stages read and write nothing else; a field says who writes it and who reads it.
 */

/** What an answer holds, as envelop's response cache names it: `Type:id`, or a whole type without an id. */
export type CacheEntityRecord = Parameters<Cache['invalidate']>[0] extends Iterable<infer T> ? T : never;

/** What an answer may say to HTTP caches: seconds left and tag, or not; `stale`: past its TTL, for a failed read. */
export type Cacheable =
  | { readonly maxAge: number; readonly tag: string; readonly stale?: { readonly ageSeconds: number } }
  | false;

export type OperationType = 'query' | 'mutation' | 'subscription' | 'unknown';

/** What the operation's span, log line and metrics say of it (telemetry/operation-telemetry.ts). */
export interface OperationRecord {
  readonly startedAt: number;
  /** The operationName the client sent, until the parsed document names the operation. */
  name: string | undefined;
  type: OperationType;
  /** A `@live` query: its metrics say `type="live"`, as its duration is its stream's. */
  live: boolean;
  done: boolean;
  /** The operation's span, a child of the caller's span when its request carries a traceparent. */
  readonly span: Span;
  /** The context naming `span` as the parent: the plan's and the upstream calls' spans hang under it. */
  readonly trace: Context;
}

/** GraphQL's request parameters, as the intake stage read them (GraphQL over HTTP's, and `documentId`). */
export interface OperationParams {
  query?: string | undefined;
  operationName?: string | null | undefined;
  variables?: Record<string, unknown> | null | undefined;
  extensions?: Record<string, unknown> | null | undefined;
  /** GraphQL over HTTP's persisted document id (`sha256:<hex>`). */
  documentId?: string | undefined;
}

/** Where a subscription's part says the change it answers: an SSE event's `id` (answers/parts.ts), `Last-Event-ID`. */
export const eventIdOf = Symbol('event id');

/** An operation's result: one, or a stream of parts (@defer, @stream). */
export type OperationResult = ExecutionResult | AsyncIterable<ExecutionResult>;

/** Stops an answer in parts that will not be sent: what its operation still had to do is cancelled. */
export function stopParts(parts: AsyncIterable<ExecutionResult>): void {
  void Promise.resolve((parts as AsyncGenerator).return?.(undefined)).catch(() => undefined);
}

export type { HeadChange };

/** What a mutation field (its response key) evicts from the response cache if it may have changed something. */
export interface FieldEvictions {
  readonly key: string;
  readonly records: readonly CacheEntityRecord[];
  /** The head it names, whose watchers are told, and whether it deletes it (plan/facts.ts: `ChangesFact.deletes`). */
  readonly head?: { readonly id: string; readonly deletes: boolean } | undefined;
}

/** The document an operation runs, as the document stage prepared it (documents/prepared.ts). */
export interface PreparedDocument {
  /** Its text (after APQ or the trusted documents named it). */
  readonly text: string;
  readonly document: DocumentNode;
  /** Whether it uses @defer or @stream anywhere. */
  readonly incremental: boolean;
  /** The document without @defer and @stream, for an answer in one result (kept once made). */
  readonly plain: DocumentNode;
}

/** What validating a request's documents costs so far, each distinct document counted once. */
export interface ValidationSpent {
  pairs: number;
  readonly documents: Set<DocumentNode>;
}

/** The base of the absolute URL a request target is read against (`asRequest`). */
const ORIGIN = 'http://gateway';

/** What a request that did not come over HTTP brings besides its incoming side. */
export interface RequestFacts {
  /** What its results go out in (a WebSocket's messages, an event's one result). */
  readonly carries: Negotiated;
  /** Its id: an event is logged under its subscription's. @default the incoming `x-request-id` when sane, else made */
  readonly requestId?: string | undefined;
  /** The trace it continues: an event's hangs under its subscription's span. @default read from its headers */
  readonly parent?: Context | undefined;
  /** The client app it is counted for. @default read from its headers, with the trace */
  readonly client?: ClientIdentity | undefined;
}

/** Its operations' type, named by operation-state.ts (declaration merging): an import back would close a cycle. */
// biome-ignore lint/suspicious/noEmptyInterface: operation-state.ts declares its one member (declaration merging)
export interface RequestOperations {}

/**
 * One request: made as it arrives (HTTP), as a WebSocket message names an operation, or as a subscription's event is
 * resolved. Only an HTTP request has `http` (its method, target and body): the intake and answer stages are its alone.
 */
export class RequestState {
  readonly startedAt = performance.now();
  /** Its operations: read from its parameters (a batch has several), or the one it entered with. */
  readonly operations: RequestOperations['operation'][] = [];
  /** The body was a JSON array (intake/batching.ts): its answer is an array too. */
  batched = false;
  /** A batch's document being prepared (documents/prepared.ts): the next one not kept waits for it and a turn. */
  preparing: Promise<unknown> | undefined;
  /** A batch of two or more: the loaders, the call budget and the answer bytes its operations share. */
  batch: RequestBatch | undefined;
  /** What its answer may go out in: from Accept (answers/negotiation.ts: `negotiationOf`), or its transport's. */
  negotiated: Negotiated | undefined;
  /** The caller's trace (its traceparent) and client app, read by the telemetry as it arrives. */
  parent: Context | undefined;
  client: ClientIdentity | undefined;
  /** What its answer may say to HTTP caches; set by the response cache, read as the headers are written. */
  cacheable: Cacheable | undefined;
  /** Why the intake stage refused it, if it did: answered instead of any operation. */
  refusal: GraphQLError | WholeAnswer | undefined;
  /** Its HTTP side, for an HTTP request: what the intake reads (method, target, body) and the answer stage answers. */
  readonly http: HttpIncoming | undefined;
  #caller: Caller | undefined;
  #validationSpent: ValidationSpent | undefined;
  #requestId: string | undefined;
  #tokenCaller: string | null | undefined;
  #like: RequestLike | undefined;
  #quotas: { requests?: RateLimiterRes; address?: RateLimiterRes } | undefined;

  constructor(
    readonly incoming: Incoming,
    /** How its caller is told: its address (TRUST_PROXY), the tokens known to be real. */
    private readonly callers: CallerRules,
    /** An HTTP request's own side, or what a request that did not come over HTTP brings. */
    from: { readonly http: HttpIncoming } | RequestFacts,
  ) {
    if ('http' in from) {
      this.http = from.http;
      return;
    }
    this.http = undefined;
    this.negotiated = from.carries;
    this.#requestId = from.requestId;
    this.parent = from.parent;
    this.client = from.client;
  }

  /**
   * A request of the gateway's own on this one's behalf (a subscription's event): its headers and peer (the same caller
   * and token), a signal nothing aborts (subscribers share its work, bounded by its deadline), and `facts`.
   */
  onBehalf(facts: RequestFacts): RequestState {
    const { headers, peer } = this.incoming;
    return new RequestState({ headers, peer, signal: new AbortController().signal, gone: false }, this.callers, facts);
  }

  /** An HTTP request, as its transport hands it over. */
  static ofHttp(incoming: HttpIncoming, callers: CallerRules): HttpRequest {
    return new RequestState(incoming, callers, { http: incoming }) as HttpRequest;
  }

  get headers(): RequestHeaders {
    return this.incoming.headers;
  }

  get signal(): AbortSignal {
    return this.incoming.signal;
  }

  get gone(): boolean {
    return this.incoming.gone;
  }

  /** An HTTP request as library plugins read one, made on first use. */
  get asRequest(): RequestLike {
    const http = this.http!;
    this.#like ??= { method: http.method, url: ORIGIN + http.target, headers: http.headers };
    return this.#like;
  }

  /** What the limiters last said, for the RateLimit headers (traffic/rate-limit-headers.ts). Made on first use. */
  get quotas(): { requests?: RateLimiterRes; address?: RateLimiterRes } {
    this.#quotas ??= {};
    return this.#quotas;
  }

  /** What validating its documents cost so far (guards/fragment-pairs.ts), a batch's shared. Made on first use. */
  get validationSpent(): ValidationSpent {
    this.#validationSpent ??= { pairs: 0, documents: new Set() };
    return this.#validationSpent;
  }

  /** The caller its Authorization names (callers.ts), hashed once: for the caller limits and the cache's scope. */
  get tokenCaller(): string | undefined {
    if (this.#tokenCaller === undefined)
      this.#tokenCaller = tokenCallerOf(this.incoming.headers.get('authorization') ?? undefined) ?? null;
    return this.#tokenCaller ?? undefined;
  }

  /** Whom its operations are charged to (callers.ts), worked out once: load shedding's shares and the caller limits. */
  get caller(): Caller {
    this.#caller ??= callerFrom(
      this.tokenCaller,
      this.incoming.headers.get('x-forwarded-for') ?? undefined,
      this.incoming.peer,
      this.callers,
    );
    return this.#caller;
  }

  /** The id its log lines, upstream calls and answer carry: the incoming `x-request-id` when sane, else made once. */
  get requestId(): string {
    this.#requestId ??= requestIdFrom(this.incoming);
    return this.#requestId;
  }

  startBatch(): void {
    this.batch = new RequestBatch();
  }
}

/** An HTTP request: the intake and answer stages' (its method, target and body in `http`). */
export type HttpRequest = RequestState & { readonly http: HttpIncoming };
