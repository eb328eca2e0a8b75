import { createSourceEventStream, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createGraphQLError, isAsyncIterable } from 'graphql-yoga';
import type { HeadChange } from '../../domain/head-changes.js';
import type { HeadChangeSource } from '../../schema/context.js';
import type { RealTimeMetrics } from '../instruments/real-time-metrics.js';
import type { MaybePromise, Policy } from '../pipeline/stages.js';
import { operationOf, type OperationResult, type OperationState, type RequestState } from '../request-state.js';
import { changeQueue } from './change-queue.js';
import { EventResolutions, type OperationEntry } from './event-resolutions.js';
import type { HeadEvents } from './head-events.js';
import type { HeadPolling } from './head-polling.js';
import { liveQuery } from './live-queries.js';
import { subscriberStream, transportOf } from './subscriber-stream.js';

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
  /** Runs a query on its context (documents/execution.ts): a live query's first result. */
  readonly execute: (operation: OperationState) => MaybePromise<OperationResult>;
  /** Told of each subscription refused for a limit, for metrics. */
  readonly onRefused?: () => void;
}

export interface Subscriptions {
  /** Where `Subscription.headChanged` listens (schema/context.ts). */
  readonly headChanges: HeadChangeSource;
  /** Its policy: the execution stage's step that runs a subscription or a live query as a stream. */
  readonly policy: Policy;
  /** Open subscriptions in this process. */
  open(): number;
  /** Where its events enter the one path (event-resolutions.ts): the pipeline, once it is made of the policies that hold this. */
  enterThrough(entry: OperationEntry): void;
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
 * - each event is resolved as an operation of the gateway's own on its subscribers' behalf
 *   (event-resolutions.ts: entering the one path at the document stage, meeting the policies that
 *   concern events), shared by subscribers with the same token, document and variables;
 * - the stream ends after a deletion, when the token is refused, when the client leaves, and when
 *   the process stops (`completeAll`);
 * - a live query (`@live`) is a stream too (live-queries.ts), counted as a subscription; its first
 *   result is its own operation's, run here;
 * - limits: SUBSCRIPTIONS_PER_CALLER and SUBSCRIPTIONS_MAX, refused `SUBSCRIPTION_LIMIT` (429).
 * Its streams are Repeaters: a `return()` ends one at once, settling a `next()` still waiting.
 */
export function useSubscriptions(options: SubscriptionsOptions): Subscriptions {
  const { schema, events, polling, metrics } = options;
  /** Each open stream, and what it holds (its place in the limits, its count as open) until its results are out. */
  const open = new Map<OperationState, { readonly stream: AsyncIterableIterator<ExecutionResult>; readonly release: () => void }>();
  const places = placesOf(options.limits);
  const resolutions = new EventResolutions();
  let stopping = false;
  const stopped = () => stopping;
  /** The stream of `operation`, holding its place and its count as open until the release stage gives them back (the transport is done with it, however it ended). */
  const held = (operation: OperationState, stream: AsyncIterableIterator<ExecutionResult>, place: () => void): AsyncIterableIterator<ExecutionResult> => {
    const closed = metrics.opened(transportOf(operation));
    open.set(operation, {
      stream,
      release: () => {
        closed();
        place();
      },
    });
    return stream;
  };
  const execute = async (operation: OperationState): Promise<OperationResult> => {
    const place = places.take(operation.request.caller.key);
    if (typeof place !== 'function') {
      options.onRefused?.();
      return place;
    }
    if (operation.live) {
      const first = Promise.resolve(options.execute(operation)) as Promise<ExecutionResult>;
      return held(operation, liveQuery(operation, first, { listen: events.listen, polling, resolutions, metrics, throttleMs: options.liveThrottleMs, stopping: stopped }), place);
    }
    const { params } = operation;
    const args = { schema, document: operation.document!, contextValue: operation.context, variableValues: params.variables ?? undefined, operationName: params.operationName ?? undefined } as ExecutionArgs;
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) {
      place();
      return source;
    }
    return held(operation, subscriberStream(operation, source as AsyncIterableIterator<HeadChange>, { resolutions, metrics, stopping: stopped }), place);
  };
  const release = (request: RequestState) => {
    for (const operation of request.operations) {
      const stream = open.get(operation);
      if (stream === undefined) continue;
      open.delete(operation);
      stream.release();
    }
  };
  return {
    headChanges: (id, context) => {
      const unwatch = polling.watch(id);
      // An SSE client reconnecting (Last-Event-ID: the event id of the last change it was sent) first gets what it missed.
      const lastEventId = operationOf(context)?.request.headers.get('last-event-id');
      const missed = lastEventId ? events.missed(id, lastEventId) : undefined;
      return changeQueue(events.listen, id, { missed, onFinish: unwatch, onFolded: () => metrics.dropped.inc({ reason: 'folded' }) });
    },
    // Its release: once the transport is done with a stream (it ended, or its client left), its place is given back.
    policy: { name: 'subscriptions', execution: (operation) => (operation.streams ? execute(operation) : undefined), release },
    open: places.open,
    enterThrough: (entry) => resolutions.enterThrough(entry),
    completeAll() {
      stopping = true;
      for (const { stream } of [...open.values()]) void stream.return?.(undefined);
    },
  };
}
