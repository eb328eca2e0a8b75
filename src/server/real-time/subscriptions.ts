import { execute } from '@graphql-tools/executor';
import type { PubSub } from '@graphql-yoga/subscription';
import { createSourceEventStream, type DocumentNode, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { createGraphQLError, isAsyncIterable } from 'graphql-yoga';
import type { HeadChange } from '../../domain/head-changes.js';
import { createContext, type ContextOptions, type HeadChangeSource } from '../../schema/context.js';
import { wholeDocumentOf } from '../documents/prepared.js';
import type { MaybePromise } from '../pipeline/stages.js';
import type { OperationResult, OperationState } from '../request-state.js';
import type { HeadTopics } from './head-events.js';

export interface SubscriptionLimits {
  /** Open subscriptions one caller (its token, or its address without one) may hold in this process. */
  readonly perCaller: number;
  /** Open subscriptions this process holds for every caller together. */
  readonly max: number;
}

export interface SubscriptionsOptions {
  readonly schema: GraphQLSchema;
  readonly pubsub: PubSub<HeadTopics>;
  /** What each event's resolution is given: a context of its own, as an operation's (its own subscribe runs on the operation's). */
  readonly contextOptions: ContextOptions;
  readonly limits: SubscriptionLimits;
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
  /** Ends every open stream (the process stops): each completes, so its client reconnects, to another replica. */
  completeAll(): void;
}

/** A subscriber's end of a head's changes: those not yet taken folded into one (the latest; a deletion kept). */
interface ChangeQueue extends AsyncIterableIterator<HeadChange> {
  finish(): void;
}

const done: IteratorReturnResult<undefined> = Object.freeze({ done: true, value: undefined });

/**
 * The changes to head `id`, as a subscriber takes them. A subscriber that takes them slower than
 * they come has one waiting at most: the latest (a deletion stays), since each event only says
 * "read it again". So no subscriber's queue grows, however slow.
 */
function changeQueue(pubsub: PubSub<HeadTopics>, id: string, onFinish: (queue: ChangeQueue) => void): ChangeQueue {
  const events = pubsub.subscribe('headChanged', id)[Symbol.asyncIterator]();
  let pending: HeadChange | undefined;
  let waiting: ((step: IteratorResult<HeadChange, undefined>) => void) | undefined;
  let finished = false;
  const deliver = () => {
    if (waiting === undefined || (pending === undefined && !finished)) return;
    const resolve = waiting;
    waiting = undefined;
    if (pending === undefined) return resolve(done);
    const change = pending;
    pending = undefined;
    resolve({ done: false, value: change });
  };
  const queue: ChangeQueue = {
    [Symbol.asyncIterator]: () => queue,
    next: () =>
      new Promise((resolve) => {
        waiting = resolve;
        deliver();
      }),
    return: () => {
      queue.finish();
      return Promise.resolve(done);
    },
    finish() {
      if (finished) return;
      finished = true;
      pending = undefined;
      void events.return?.();
      onFinish(queue);
      deliver();
    },
  };
  void (async () => {
    for (let step = await events.next(); !step.done && !finished; step = await events.next()) {
      pending = pending?.deleted === true ? pending : step.value;
      deliver();
    }
  })();
  return queue;
}

/** Whether a result says the subscriber's token is refused now: its stream ends. */
const refusedToken = (result: ExecutionResult) => result.errors?.some((error) => error.extensions?.code === 'UNAUTHENTICATED') === true;

/** What subscribers share one resolution of an event by: the same token, document and variables read the same. */
function sharingKey(operation: OperationState): string {
  const { request, params } = operation;
  return `${request.tokenCaller ?? ''}\n${params.operationName ?? ''}\n${JSON.stringify(params.variables ?? {})}\n${operation.prepared!.text}`;
}

/** A signal never aborted: an event's resolution is bounded by its operation's deadline, and shared, so no one subscriber's hang-up stops it. */
const unaborted = new AbortController().signal;

/**
 * Subscriptions on the one path: a subscription operation is documented, admitted and planned as
 * any other, and its result is a stream of parts (as @defer's are), so every transport that
 * carries parts carries it, with the same result steps (masking) on each part. What is its own:
 * - its source: graphql-js's `createSourceEventStream` runs the root field's `subscribe` (its
 *   arguments validated as any field's) on the head's changes (`headChanges`);
 * - each event is resolved as an operation of its own: a fresh context (loaders, call budget,
 *   deadline) with the operation's plan, the event as the root value. Subscribers that share
 *   token, document and variables share that resolution (one upstream read per event for all);
 * - the stream ends after a deletion, when the token is refused, when the client leaves, and when
 *   the process stops (`completeAll`);
 * - limits: SUBSCRIPTIONS_PER_CALLER and SUBSCRIPTIONS_MAX, refused `SUBSCRIPTION_LIMIT`.
 */
export function useSubscriptions(options: SubscriptionsOptions): Subscriptions {
  const { schema, pubsub, contextOptions, limits } = options;
  const queues = new Set<ChangeQueue>();
  const perCaller = new Map<string, number>();
  let open = 0;
  /** Each event's resolution per sharing key, while the event is held by a subscriber's queue or stream. */
  const resolutions = new WeakMap<HeadChange, Map<string, MaybePromise<ExecutionResult>>>();

  const refusal = (message: string) => ({ errors: [createGraphQLError(message, { extensions: { code: 'SUBSCRIPTION_LIMIT', http: { status: 429 } } })] });

  /** An event resolved for `operation`: as an operation of its own, once per sharing key. */
  const resolution = (change: HeadChange, operation: OperationState, key: string, document: DocumentNode): MaybePromise<ExecutionResult> => {
    let byKey = resolutions.get(change);
    if (byKey === undefined) resolutions.set(change, (byKey = new Map()));
    let resolved = byKey.get(key);
    if (resolved === undefined) {
      const { request, params } = operation;
      const contextValue = createContext({ headers: request.headers, signal: unaborted }, contextOptions, { requestId: request.requestId, batch: undefined, trace: operation.record?.trace, plan: operation.plan });
      const args = { schema, document, rootValue: change, contextValue, variableValues: params.variables ?? undefined, operationName: params.operationName ?? undefined } as ExecutionArgs;
      resolved = execute(args) as MaybePromise<ExecutionResult>;
      byKey.set(key, resolved);
    }
    return resolved;
  };

  /** The results of `source`'s events for `operation`, until one ends it; `release` once it ends. */
  const stream = (operation: OperationState, source: AsyncIterator<HeadChange>, release: () => void): AsyncIterableIterator<ExecutionResult> => {
    const key = sharingKey(operation);
    // Without @defer and @stream: an event's result is one part.
    const document = wholeDocumentOf(operation) ?? operation.document!;
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      release();
      void source.return?.();
    };
    const results: AsyncIterableIterator<ExecutionResult> = {
      [Symbol.asyncIterator]: () => results,
      async next() {
        if (ended) return done;
        const step = await source.next();
        if (step.done || ended) {
          end();
          return done;
        }
        const result = await resolution(step.value, operation, key, document);
        if (step.value.deleted === true || refusedToken(result)) end();
        return { done: false, value: result };
      },
      return() {
        end();
        return Promise.resolve(done);
      },
    };
    return results;
  };

  return {
    headChanges: (id) => {
      const queue = changeQueue(pubsub, id, (finished) => queues.delete(finished));
      queues.add(queue);
      return queue;
    },
    async execute(operation) {
      const caller = operation.request.caller.key;
      const held = perCaller.get(caller) ?? 0;
      if (open >= limits.max || held >= limits.perCaller) {
        options.onRefused?.();
        return open >= limits.max
          ? refusal(`This gateway holds ${limits.max} subscriptions, its most; try again later or another replica.`)
          : refusal(`You hold ${limits.perCaller} subscriptions open, the most one caller may; end one first.`);
      }
      open++;
      perCaller.set(caller, held + 1);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        open--;
        const left = (perCaller.get(caller) ?? 1) - 1;
        if (left === 0) perCaller.delete(caller);
        else perCaller.set(caller, left);
      };
      const { params } = operation;
      const source = await createSourceEventStream({
        schema,
        document: operation.document!,
        contextValue: operation.context,
        variableValues: params.variables ?? undefined,
        operationName: params.operationName ?? undefined,
      } as ExecutionArgs);
      if (!isAsyncIterable(source)) {
        release();
        return source;
      }
      return stream(operation, (source as AsyncIterable<HeadChange>)[Symbol.asyncIterator](), release);
    },
    open: () => open,
    completeAll() {
      for (const queue of [...queues]) queue.finish();
    },
  };
}
