import { randomUUID } from 'node:crypto';
import { type Context, ROOT_CONTEXT } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { HeadChange } from '../domain/head-changes.js';
import type { Strategy } from '../domain/needs.js';
import type { RequestBatch } from '../loaders/request-batch.js';
import { RequestLoaders } from '../loaders/request-loaders.js';
import { EMPTY_PLAN, type OperationPlan } from '../plan/operation-plan.js';
import { OperationGuard } from '../upstream/operation-guard.js';
import type { UpstreamCaller } from '../upstream/transport.js';
import type { Upstream } from '../upstream/upstream.js';

/** Everything one GraphQL request's resolvers may use. Built per request, never shared. */
export interface GatewayContext {
  readonly requestId: string;
  /** The caller's `Authorization` header, if any: forwarded upstream, never logged or echoed. */
  readonly authorization: string | undefined;
  /** The upstream bound to this request (token, request id, cancellation); for mutations. */
  readonly upstream: UpstreamCaller;
  readonly loaders: RequestLoaders;
  /** The operation's upstream budget, deadline and call count. */
  readonly guard: OperationGuard;
  /**
   * The operation's upstream plan, made before execution (server/documents/upstream-plan.ts): what
   * each head and connection reads. An empty one: fields load what they need as they run.
   */
  readonly plan: OperationPlan;
  /**
   * The operation's span (server/telemetry/operation-telemetry.ts): the parent of its plan's and upstream calls' spans.
   */
  readonly trace: Context;
  /**
   * The request's logger (its request id bound), made on first use: most operations never log.
   * A method, not a getter: a copy of the context (`{ ...context }`) would call a getter, and make one.
   */
  readonly logger: () => Logger;
  /** The changes to one head (by UUID) as they come: what `Subscription.headChanged` streams. */
  readonly headChanges: HeadChangeSource;
}

/**
 * The changes to one head (by UUID) as they come to the operation of `context`, until the iteration is ended
 * (server/real-time/).
 */
export type HeadChangeSource = (id: string, context: GatewayContext) => AsyncIterable<HeadChange>;

/** Where no process serves subscriptions (a context made outside the gateway's pipeline). */
const noHeadChanges: HeadChangeSource = () => {
  throw new Error('No source of head changes: subscriptions run in the gateway');
};

export interface ContextOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  readonly fanout: number;
  readonly budget: number;
  readonly deadlineMs: number;
  readonly strategy: Strategy;
  /** Where subscriptions listen for head changes. @default none: a subscription fails */
  readonly headChanges?: HeadChangeSource | undefined;
}

const requestIdPattern = /^[\w.:-]{1,128}$/;

/** Keeps a sane incoming `x-request-id` so traces join up; anything else gets a fresh one. */
export function requestIdFrom(request: { readonly headers: Pick<Headers, 'get'> }): string {
  const incoming = request.headers.get('x-request-id');
  return incoming !== null && requestIdPattern.test(incoming) ? incoming : randomUUID();
}

/** What the server knows of the operation's request when it makes the context. */
export interface RequestFacts {
  /** The request's id (one per request: a batch's operations share it). */
  readonly requestId: string;
  /** The batch the request carries, whose loaders its operations share (loaders/request-batch.ts). */
  readonly batch: RequestBatch | undefined;
  /** The operation's span context. */
  readonly trace: Context | undefined;
  /** The operation's upstream plan. @default an empty one: fields load what they need */
  readonly plan?: OperationPlan | undefined;
}

/** What the context reads of its request: the caller's headers and the signal of its hanging up. */
export interface ContextRequest {
  readonly headers: Pick<Headers, 'get'>;
  readonly signal: AbortSignal;
}

export function createContext(request: ContextRequest, options: ContextOptions, facts: RequestFacts): GatewayContext {
  const { requestId, batch } = facts;
  const trace = facts.trace ?? ROOT_CONTEXT;
  const authorization = request.headers.get('authorization') ?? undefined;
  let logger: Logger | undefined;
  const guard = new OperationGuard({ budget: options.budget, deadlineMs: options.deadlineMs });
  // The client's signal cancels calls; the guard's deadline reaches them through remainingMs.
  // (The transport only listens to it: wrapping it in AbortSignal.any would cost every request a
  // composite signal, for a deadline the guard already keeps.)
  const upstream = options.upstream.forRequest({ requestId, authorization, signal: request.signal, guard, trace });
  const loaderOptions = { fanout: options.fanout, strategy: options.strategy };
  return {
    requestId,
    authorization,
    upstream,
    loaders:
      batch === undefined
        ? new RequestLoaders(upstream, loaderOptions)
        : // Reads the batch shares hang under the span of the operation that made its loaders (the first).
          batch.loadersFor(
            guard,
            (batchGuard) =>
              new RequestLoaders(
                options.upstream.forRequest({
                  requestId,
                  authorization,
                  signal: request.signal,
                  guard: batchGuard,
                  trace,
                }),
                loaderOptions,
              ),
          ),
    guard,
    plan: facts.plan ?? EMPTY_PLAN,
    trace,
    // A pino child per request is not free (it compiles the redaction of its bindings).
    logger: () => (logger ??= options.logger.child({ requestId })),
    headChanges: options.headChanges ?? noHeadChanges,
  };
}
