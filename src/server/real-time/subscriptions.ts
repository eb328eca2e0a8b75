import { createSourceEventStream, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createGraphQLError, isAsyncIterable } from 'graphql-yoga';
import type { HeadChange } from '../../domain/head-changes.js';
import type { HeadChangeSource } from '../../schema/context.js';
import type { RealTimeMetrics } from '../instruments/real-time-metrics.js';
import { type OperationState, operationOf, type PreparedOperationState } from '../operation-state.js';
import type { MaybePromise, Policy } from '../pipeline/stages.js';
import type { OperationResult, RequestState } from '../request-state.js';
import { changeQueue } from './change-queue.js';
import { type EventConcurrency, EventResolutions, type OperationEntry } from './event-resolutions.js';
import type { HeadEvents } from './head-events.js';
import type { HeadPolling } from './head-polling.js';
import { Ledger, type LedgerBound } from './ledger.js';
import { liveQuery } from './live-queries.js';
import { subscriberStream, transportOf } from './subscriber-stream.js';

export interface SubscriptionLimits extends EventConcurrency {
  /** Open subscriptions per caller (its token, or its address without one); `max` for the process. */
  readonly perCaller: number;
  readonly max: number;
  /** Heads one caller's subscriptions and live queries watch together; `watchedMax` for the process. */
  readonly watchedPerCaller: number;
  readonly watchedMax: number;
}

export interface SubscriptionsOptions {
  readonly schema: GraphQLSchema;
  readonly events: Pick<HeadEvents, 'listen' | 'missed'>;
  readonly limits: SubscriptionLimits;
  readonly polling: HeadPolling;
  readonly metrics: RealTimeMetrics;
  /** SUBSCRIPTION_LIVE_THROTTLE_MS: the least time between two results of a live query. */
  readonly liveThrottleMs: number;
  /** Runs a live query's first result as any query (documents/execution.ts). */
  readonly execute: (operation: PreparedOperationState) => MaybePromise<OperationResult>;
  /** Told of each subscription refused for a limit (metrics). */
  readonly onRefused?: () => void;
}

export interface Subscriptions {
  /** Where `Subscription.headChanged` listens (schema/context.ts). */
  readonly headChanges: HeadChangeSource;
  /** The execution stage's step that runs a subscription or a live query as a stream. */
  readonly policy: Policy;
  /** Open subscriptions in this process. */
  open(): number;
  /** Where events enter the one path (event-resolutions.ts): the pipeline, made after the policies that hold this. */
  enterThrough(entry: OperationEntry): void;
  /** Ends every open stream (the process stops): each completes, so its client reconnects, to another replica. */
  completeAll(): void;
}

type Stream = AsyncIterableIterator<ExecutionResult>;

/** Why a subscription or live query is refused, by the ledger and the bound it is over. */
const refusals: Record<'places' | 'watched', Record<LedgerBound, (limits: SubscriptionLimits) => string>> = {
  places: {
    process: (limits) =>
      `This gateway holds ${limits.max} subscriptions, its most; try again later or another replica.`,
    caller: (limits) => `You hold ${limits.perCaller} subscriptions open, the most one caller may; end one first.`,
    share: () =>
      'This gateway is busy and you hold your share of its subscriptions; end one first, or try again later.',
  },
  watched: {
    process: (limits) =>
      `This gateway watches ${limits.watchedMax} heads for subscriptions and live queries, its most; try again later or another replica.`,
    caller: (limits) =>
      `Your subscriptions and live queries would watch more than ${limits.watchedPerCaller} heads, the most one caller may.`,
    share: () =>
      'This gateway is busy and your subscriptions and live queries watch your share of its heads; end one first, or try again later.',
  },
};

/** The open streams, each holding its place in the limits and its count as open until its results are out. */
class OpenStreams {
  readonly #open = new Map<OperationState, { stream: Stream; release: () => void; closed: () => void }>();

  constructor(private readonly metrics: RealTimeMetrics) {}

  /** `stream` of `operation`, holding what `release` gives back until the release stage (however it ended). */
  hold(operation: OperationState, stream: Stream, release: () => void): Stream {
    this.#open.set(operation, { stream, release, closed: this.metrics.opened(transportOf(operation)) });
    return stream;
  }

  /** The release stage's step: what a request's streams held, given back. */
  readonly release = (request: RequestState): void => {
    for (const operation of request.operations) {
      const held = this.#open.get(operation);
      if (held === undefined) continue;
      this.#open.delete(operation);
      held.closed();
      held.release();
    }
  };

  /** Ends every open stream (each completes; its transport then finishes it). */
  endAll(): void {
    for (const { stream } of [...this.#open.values()]) void stream.return?.(undefined);
  }
}

/** A live query's charge on its caller's watched heads as they change (`refuse` when over), given back at its end. */
function watchCharge(watched: Ledger, caller: string, refuse: (over: LedgerBound) => ExecutionResult) {
  let charged = 0;
  return {
    charge(heads: number): ExecutionResult | undefined {
      const over = watched.take(caller, heads - charged);
      if (over !== undefined) return refuse(over);
      watched.give(caller, charged - heads);
      charged = heads;
      return undefined;
    },
    giveBack: () => {
      watched.give(caller, charged);
      charged = 0;
    },
  };
}

/** Where `Subscription.headChanged` listens: a queue per subscriber on the head's changes, and a watch for polling. */
function headChangeSource({ events, polling, metrics }: SubscriptionsOptions): HeadChangeSource {
  return (id, context) => {
    const unwatch = polling.watch(id);
    // A reconnecting SSE client (Last-Event-ID: the last change it was sent) first gets what it missed.
    const lastEventId = operationOf(context)?.request.headers.get('last-event-id');
    return changeQueue(events.listen, id, {
      missed: lastEventId ? events.missed(id, lastEventId) : undefined,
      onFinish: unwatch,
      onFolded: () => metrics.dropped.inc({ reason: 'folded' }),
    });
  };
}

/**
 * Subscriptions on the one path: documented, admitted and planned as any operation, the result a stream of parts (as
 * @defer's), so every transport that carries parts carries it, masked part by part. Live queries count as
 * subscriptions. Limits are refused `SUBSCRIPTION_LIMIT` (429): open subscriptions and watched heads (a subscription
 * one, a live query those it read), shared fairly once half full (ledger.ts).
 */
export function useSubscriptions(options: SubscriptionsOptions): Subscriptions {
  const { schema, events, polling, metrics, limits } = options;
  const open = new OpenStreams(metrics);
  const places = new Ledger(limits.perCaller, limits.max);
  const watched = new Ledger(limits.watchedPerCaller, limits.watchedMax);
  const resolutions = new EventResolutions(limits);
  let stopping = false;
  const streams = { resolutions, metrics, stopping: () => stopping };
  const live = { ...streams, listen: events.listen, polling, throttleMs: options.liveThrottleMs };
  const refuse = (message: string): ExecutionResult => {
    options.onRefused?.();
    return {
      errors: [createGraphQLError(message, { extensions: { code: 'SUBSCRIPTION_LIMIT', http: { status: 429 } } })],
    };
  };
  const execute = async (operation: PreparedOperationState): Promise<OperationResult> => {
    const caller = operation.request.caller.key;
    const over = places.take(caller);
    if (over !== undefined) return refuse(refusals.places[over](limits));
    const { charge, giveBack } = watchCharge(watched, caller, (over) => refuse(refusals.watched[over](limits)));
    const release = () => {
      giveBack();
      places.give(caller);
    };
    if (operation.live) {
      const first = Promise.resolve(options.execute(operation)) as Promise<ExecutionResult>;
      return open.hold(operation, liveQuery(operation, first, { ...live, charge }), release);
    }
    const refusal = charge(1);
    if (refusal !== undefined) {
      release();
      return refusal;
    }
    const { params } = operation;
    const source = await createSourceEventStream({
      schema,
      document: operation.document,
      contextValue: operation.context,
      variableValues: params.variables ?? undefined,
      operationName: params.operationName ?? undefined,
    } as ExecutionArgs);
    if (!isAsyncIterable(source)) {
      release();
      return source;
    }
    const stream = subscriberStream(operation, source as AsyncIterableIterator<HeadChange>, streams);
    return open.hold(operation, stream, release);
  };
  return {
    headChanges: headChangeSource(options),
    // Its release: once the transport is done with a stream (it ended, or its client left), its place is given back.
    policy: {
      name: 'subscriptions',
      execution: (operation) => (operation.streams ? execute(operation) : undefined),
      release: open.release,
    },
    open: () => places.total,
    enterThrough: (entry) => resolutions.enterThrough(entry),
    completeAll() {
      stopping = true;
      open.endAll();
    },
  };
}
