import { createSourceEventStream, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createGraphQLError, isAsyncIterable } from 'graphql-yoga';
import type { HeadChange } from '../../domain/head-changes.js';
import type { HeadChangeSource } from '../../schema/context.js';
import type { RealTimeMetrics } from '../instruments/real-time-metrics.js';
import type { MaybePromise, Serve } from '../pipeline/stages.js';
import { operationOf, type OperationResult, type OperationState } from '../request-state.js';
import { changeQueue, type ChangeQueue } from './change-queue.js';
import type { HeadEvents } from './head-events.js';
import type { HeadPolling } from './head-polling.js';
import { liveQuery } from './live-queries.js';
import { EventResolutions, subscriberStream } from './subscriber-stream.js';

export interface SubscriptionLimits {
  /** Open subscriptions one caller (its token, or its address without one) may hold in this process. */
  readonly perCaller: number;
  /** Open subscriptions this process holds for every caller together. */
  readonly max: number;
}

export interface SubscriptionsOptions {
  readonly schema: GraphQLSchema;
  /** Where head changes are listened to, and what a reconnecting SSE client missed is found. */
  readonly events: Pick<HeadEvents, 'listen' | 'missed'>;
  readonly limits: SubscriptionLimits;
  /** The heads subscribers watch, read for changes made outside the gateway. */
  readonly polling: HeadPolling;
  readonly metrics: RealTimeMetrics;
  /** SUBSCRIPTION_LIVE_THROTTLE_MS: the least time between two results of a live query. */
  readonly liveThrottleMs: number;
  /** Told of each subscription refused for a limit, for metrics. */
  readonly onRefused?: () => void;
}

export interface Subscriptions {
  /** Where `Subscription.headChanged` listens (schema/context.ts). */
  readonly headChanges: HeadChangeSource;
  /** The execution stage's executor for a subscription: its stream of results, or its refusal. */
  readonly execute: (operation: OperationState) => MaybePromise<OperationResult>;
  /** Open subscriptions in this process. */
  open(): number;
  /** Where its events' resolutions go, each a request (real-time/event-requests.ts): the gateway's door, once it is made of the policies that hold this. */
  serveEventsThrough(serve: Serve): void;
  /** Ends every open stream (the process stops): each completes, so its client reconnects, to another replica. */
  completeAll(): void;
}

const refusal = (message: string): ExecutionResult => ({ errors: [createGraphQLError(message, { extensions: { code: 'SUBSCRIPTION_LIMIT', http: { status: 429 } } })] });

/** The open subscriptions' count, per caller and for the process: a place taken, or the refusal of one over a limit. */
function placesOf(limits: SubscriptionLimits) {
  const perCaller = new Map<string, number>();
  let open = 0;
  return {
    open: () => open,
    take(caller: string): (() => void) | ExecutionResult {
      const held = perCaller.get(caller) ?? 0;
      if (open >= limits.max) return refusal(`This gateway holds ${limits.max} subscriptions, its most; try again later or another replica.`);
      if (held >= limits.perCaller) return refusal(`You hold ${limits.perCaller} subscriptions open, the most one caller may; end one first.`);
      open++;
      perCaller.set(caller, held + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        open--;
        const left = (perCaller.get(caller) ?? 1) - 1;
        if (left === 0) perCaller.delete(caller);
        else perCaller.set(caller, left);
      };
    },
  };
}

/**
 * Subscriptions on the one path: a subscription operation is documented, admitted and planned as
 * any other, and its result is a stream of parts (as @defer's are), so every transport that
 * carries parts carries it, with the same result steps (masking) on each part. What is its own:
 * - its source: graphql-js's `createSourceEventStream` runs the root field's `subscribe` (its
 *   arguments validated as any field's) on the head's changes (`headChanges`: a queue per
 *   subscriber that folds what it has not taken, and a watch on the head for polling);
 * - each event is resolved as an operation of its own, a request on the one path on the
 *   subscriber's behalf (event-requests.ts: counted in flight and by the caller's limits, refused
 *   as an error event, logged and measured), shared by subscribers with the same token, document
 *   and variables (subscriber-stream.ts);
 * - the stream ends after a deletion, when the token is refused, when the client leaves, and when
 *   the process stops (`completeAll`);
 * - a live query (`@live`) is a stream too (live-queries.ts), counted as a subscription;
 * - limits: SUBSCRIPTIONS_PER_CALLER and SUBSCRIPTIONS_MAX, refused `SUBSCRIPTION_LIMIT` (429).
 */
export function useSubscriptions(options: SubscriptionsOptions): Subscriptions {
  const { schema, events, polling, metrics } = options;
  /** What the process's stop ends: each subscriber's queue of changes, each live query. */
  const open = new Set<{ finish(): void }>();
  const places = placesOf(options.limits);
  const resolutions = new EventResolutions();
  let stopping = false;
  return {
    headChanges: (id, context) => {
      const unwatch = polling.watch(id);
      const finished = (queue: ChangeQueue) => {
        open.delete(queue);
        unwatch();
      };
      // An SSE client reconnecting (Last-Event-ID: the `at` of the last change it was sent) first gets what it missed.
      const after = Number(operationOf(context)?.request.headers.get('last-event-id') ?? Number.NaN);
      const missed = Number.isSafeInteger(after) ? events.missed(id, after) : undefined;
      const queue = changeQueue(events.listen, id, { missed, onFinish: finished, onFolded: () => metrics.dropped.inc({ reason: 'folded' }) });
      open.add(queue);
      return queue;
    },
    async execute(operation) {
      const release = places.take(operation.request.caller.key);
      if (typeof release !== 'function') {
        options.onRefused?.();
        return release;
      }
      if (operation.live) {
        const live = liveQuery(operation, { listen: events.listen, polling, resolutions, metrics, throttleMs: options.liveThrottleMs, stopping: () => stopping, release: () => (open.delete(live), release()) });
        open.add(live);
        return live;
      }
      const { params } = operation;
      const args = { schema, document: operation.document!, contextValue: operation.context, variableValues: params.variables ?? undefined, operationName: params.operationName ?? undefined } as ExecutionArgs;
      const source = await createSourceEventStream(args);
      if (!isAsyncIterable(source)) {
        release();
        return source;
      }
      return subscriberStream(operation, (source as AsyncIterable<HeadChange>)[Symbol.asyncIterator](), { resolutions, metrics, release, stopping: () => stopping });
    },
    open: places.open,
    serveEventsThrough: (serve) => resolutions.serveThrough(serve),
    completeAll() {
      stopping = true;
      for (const stream of [...open]) stream.finish();
    },
  };
}
