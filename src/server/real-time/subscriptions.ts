import { createSourceEventStream, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createGraphQLError, isAsyncIterable } from 'graphql-yoga';
import type { HeadChange } from '../../domain/head-changes.js';
import type { HeadChangeSource } from '../../schema/context.js';
import type { RealTimeMetrics } from '../instruments/real-time-metrics.js';
import { type OperationState, operationOf } from '../operation-state.js';
import type { MaybePromise, Policy } from '../pipeline/stages.js';
import type { OperationResult, RequestState } from '../request-state.js';
import { changeQueue } from './change-queue.js';
import { type EventConcurrency, EventResolutions, type OperationEntry } from './event-resolutions.js';
import type { HeadEvents } from './head-events.js';
import type { HeadPolling } from './head-polling.js';
import { Ledger, type LedgerBound, type WatchCharge } from './ledger.js';
import { liveQuery } from './live-queries.js';
import { subscriberStream, transportOf } from './subscriber-stream.js';

export interface SubscriptionLimits extends EventConcurrency {
  /** Open subscriptions one caller (its token, or its address without one) may hold in this process. */
  readonly perCaller: number;
  /** Open subscriptions this process holds for every caller together. */
  readonly max: number;
  /** Heads one caller's subscriptions and live queries may watch together. */
  readonly watchedPerCaller: number;
  /** Heads this process's subscriptions and live queries may watch together. */
  readonly watchedMax: number;
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
  /**
   * Where its events enter the one path (event-resolutions.ts): the pipeline, once it is made of the policies that hold
   * this.
   */
  enterThrough(entry: OperationEntry): void;
  /** Ends every open stream (the process stops): each completes, so its client reconnects, to another replica. */
  completeAll(): void;
}

const refusal = (message: string): ExecutionResult => ({
  errors: [createGraphQLError(message, { extensions: { code: 'SUBSCRIPTION_LIMIT', http: { status: 429 } } })],
});

/** The refusal of a subscription or live query over one of the ledgers' bounds. */
const refusals: Record<'places' | 'watched', Record<LedgerBound, (limits: SubscriptionLimits) => ExecutionResult>> = {
  places: {
    process: (limits) =>
      refusal(`This gateway holds ${limits.max} subscriptions, its most; try again later or another replica.`),
    caller: (limits) =>
      refusal(`You hold ${limits.perCaller} subscriptions open, the most one caller may; end one first.`),
    share: () =>
      refusal('This gateway is busy and you hold your share of its subscriptions; end one first, or try again later.'),
  },
  watched: {
    process: (limits) =>
      refusal(
        `This gateway watches ${limits.watchedMax} heads for subscriptions and live queries, its most; try again later or another replica.`,
      ),
    caller: (limits) =>
      refusal(
        `Your subscriptions and live queries would watch more than ${limits.watchedPerCaller} heads, the most one caller may.`,
      ),
    share: () =>
      refusal(
        'This gateway is busy and your subscriptions and live queries watch your share of its heads; end one first, or try again later.',
      ),
  },
};

/** The open streams, each with what it holds (its place in the limits, its count as open) until its results are out. */
class OpenStreams {
  readonly #open = new Map<
    OperationState,
    { readonly stream: AsyncIterableIterator<ExecutionResult>; readonly release: () => void }
  >();

  constructor(private readonly metrics: RealTimeMetrics) {}

  /**
   * `stream` of `operation`, holding what `release` gives back (and its count as open) until the release stage (its
   * transport done with it, however it ended).
   */
  hold(
    operation: OperationState,
    stream: AsyncIterableIterator<ExecutionResult>,
    release: () => void,
  ): AsyncIterableIterator<ExecutionResult> {
    const closed = this.metrics.opened(transportOf(operation));
    this.#open.set(operation, {
      stream,
      release: () => {
        closed();
        release();
      },
    });
    return stream;
  }

  /** The release stage's step: what a request's streams held, given back. */
  readonly release = (request: RequestState): void => {
    for (const operation of request.operations) {
      const held = this.#open.get(operation);
      if (held === undefined) continue;
      this.#open.delete(operation);
      held.release();
    }
  };

  /** Ends every open stream (each completes; its transport then finishes it). */
  endAll(): void {
    for (const { stream } of [...this.#open.values()]) void stream.return?.(undefined);
  }
}

/**
 * A live query's charge on its caller's watched heads, as what it watches changes (to `heads`): the
 * refusal when that does not fit (`refuse`, by the bound that refused it), and all of it given back
 * at its end.
 */
function watchCharge(
  watched: Ledger,
  caller: string,
  refuse: (over: LedgerBound) => ExecutionResult,
): { readonly charge: WatchCharge; readonly giveBack: () => void } {
  let charged = 0;
  return {
    charge(heads) {
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

/** A subscription's source: graphql-js's `createSourceEventStream` runs its root field's `subscribe` on its context. */
function sourceStream(schema: GraphQLSchema, operation: OperationState): ReturnType<typeof createSourceEventStream> {
  const { params } = operation;
  const args = {
    schema,
    document: operation.document!,
    contextValue: operation.context,
    variableValues: params.variables ?? undefined,
    operationName: params.operationName ?? undefined,
  } as ExecutionArgs;
  return createSourceEventStream(args);
}

/** Where `Subscription.headChanged` listens: a queue per subscriber on the head's changes, and a watch for polling. */
function headChangeSource(
  events: SubscriptionsOptions['events'],
  polling: HeadPolling,
  metrics: RealTimeMetrics,
): HeadChangeSource {
  return (id, context) => {
    const unwatch = polling.watch(id);
    // An SSE client reconnecting (Last-Event-ID: the event id of the last change it was sent) first gets what it
    // missed.
    const lastEventId = operationOf(context)?.request.headers.get('last-event-id');
    const missed = lastEventId ? events.missed(id, lastEventId) : undefined;
    return changeQueue(events.listen, id, {
      missed,
      onFinish: unwatch,
      onFolded: () => metrics.dropped.inc({ reason: 'folded' }),
    });
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
 * - limits, each refused `SUBSCRIPTION_LIMIT` (429): open subscriptions (SUBSCRIPTIONS_PER_CALLER,
 *   SUBSCRIPTIONS_MAX) and the heads they watch (a subscription one, a live query those it read:
 *   SUBSCRIPTION_WATCHED_HEADS_PER_CALLER, SUBSCRIPTION_WATCHED_HEADS_MAX), each shared fairly once
 *   the process is half full (ledger.ts).
 * Its streams are Repeaters: a `return()` ends one at once, settling a `next()` still waiting.
 */
export function useSubscriptions(options: SubscriptionsOptions): Subscriptions {
  const { schema, events, polling, metrics, limits } = options;
  const open = new OpenStreams(metrics);
  const places = new Ledger(limits.perCaller, limits.max);
  const watched = new Ledger(limits.watchedPerCaller, limits.watchedMax);
  const resolutions = new EventResolutions(limits);
  let stopping = false;
  const stopped = () => stopping;
  const refused = (result: ExecutionResult) => {
    options.onRefused?.();
    return result;
  };
  const execute = async (operation: OperationState): Promise<OperationResult> => {
    const caller = operation.request.caller.key;
    const over = places.take(caller);
    if (over !== undefined) return refused(refusals.places[over](limits));
    const place = () => places.give(caller);
    if (operation.live) {
      const first = Promise.resolve(options.execute(operation)) as Promise<ExecutionResult>;
      const { charge, giveBack } = watchCharge(watched, caller, (over) => refused(refusals.watched[over](limits)));
      return open.hold(
        operation,
        liveQuery(operation, first, {
          listen: events.listen,
          polling,
          resolutions,
          metrics,
          throttleMs: options.liveThrottleMs,
          stopping: stopped,
          charge,
        }),
        () => {
          giveBack();
          place();
        },
      );
    }
    const overWatched = watched.take(caller);
    if (overWatched !== undefined) {
      place();
      return refused(refusals.watched[overWatched](limits));
    }
    const watch = () => {
      watched.give(caller);
      place();
    };
    const source = await sourceStream(schema, operation);
    if (!isAsyncIterable(source)) {
      watch();
      return source;
    }
    return open.hold(
      operation,
      subscriberStream(operation, source as AsyncIterableIterator<HeadChange>, {
        resolutions,
        metrics,
        stopping: stopped,
      }),
      watch,
    );
  };
  return {
    headChanges: headChangeSource(events, polling, metrics),
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
