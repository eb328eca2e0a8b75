import { setMaxListeners } from 'node:events';
import type { ExecutionArgs, GraphQLSchema } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import type { Policy } from '../pipeline/stages.js';
import type { HeadChange } from '../request-state.js';
import { changedFields, evictionsOf } from '../response-cache/evictions.js';
import { clusterEventTarget } from '../shared-state/cluster-events.js';
import { redisEventTarget } from '../shared-state/redis-events.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import { changeLog } from './change-log.js';

/**
 * The event type (and, through Redis, the channel after its prefix: `gw:ev:headChanged:<id>`) of
 * head `id`'s changes, the event's detail the change: `createPubSub`'s topic naming, which the
 * channels kept before.
 */
const topicOf = (id: string) => `headChanged:${id}`;

export interface HeadEventsOptions {
  readonly schema: GraphQLSchema;
  /** REDIS_URL's connection: events reach every replica; without it, this process's watchers only. */
  readonly redis?: SharedRedis | undefined;
  /** An event Redis did not take (its own process's watchers have it all the same). */
  readonly onPublishFailed?: (error: unknown) => void;
  /** Told of each change a write published, for metrics. */
  readonly onPublished?: () => void;
  /** SUBSCRIPTION_REPLAY_MS: how long changes are kept for SSE clients that reconnect; 0: none. */
  readonly replayMs: number;
  /**
   * This process is a worker of several behind one port (WORKERS>1): without Redis, events go to the other workers
   * through the primary.
   */
  readonly workers?: boolean | undefined;
}

export interface HeadEvents {
  /**
   * Calls `onChange` with each change to head `id`, until the returned function is called: a listener on the event
   * target, no queue of its own.
   */
  listen(id: string, onChange: (change: HeadChange) => void): () => void;
  /**
   * Logs a change (its event id given then) and tells it to every watcher, in this process and (with REDIS_URL) every
   * other.
   */
  publish(change: Omit<HeadChange, 'eventId' | 'at'>): void;
  /** What a subscriber whose last event was `lastEventId` missed of head `id` (change-log.ts). */
  missed(id: string, lastEventId: string): Promise<HeadChange | undefined>;
  /** Its policy: a result step, that publishes a mutation's heads once it may have changed them. */
  readonly policy: Policy;
  close(): void;
}

/** An event target with no cap on a topic's listeners: a head may have thousands of watchers (Node warns past ten). */
function unbounded(target: EventTarget): EventTarget {
  setMaxListeners(0, target);
  return target;
}

/**
 * The heads that writes may have changed, told to whoever watches them, in this process and (with
 * REDIS_URL) every other (shared-state/redis-events.ts). A mutation field that names a head tells
 * it by the outcomes that evict the response cache (response-cache/evictions.ts: sent, and
 * succeeded or may have; not refused before its call, nor answered 4xx). An event is the head's
 * id alone: each watcher reads the head with its own token, and finds it gone if it was deleted.
 * A mutation answered in parts (`@defer`) tells nothing.
 */
export function useHeadEvents(options: HeadEventsOptions): HeadEvents {
  const { schema, redis } = options;
  const log = changeLog({ replayMs: options.replayMs, redis });
  // With REDIS_URL, Redis carries the events to every process; without it, workers of one process
  // group (WORKERS>1) pass them through the primary (each keeping what it hears for replay); alone, memory.
  const shared =
    redis !== undefined
      ? redisEventTarget({
          publisher: redis.client,
          subscriber: redis.subscriber(),
          onPublishFailed: options.onPublishFailed,
        })
      : options.workers === true
        ? clusterEventTarget((detail) => log.keep(detail as HeadChange))
        : undefined;
  const target = (shared ?? unbounded(new EventTarget())) as EventTarget;
  // Logged first: the event carries the id the log gave it.
  const publish = (change: Omit<HeadChange, 'eventId' | 'at'>) =>
    void log
      .append({ ...change, at: Date.now() })
      .then((logged) => target.dispatchEvent(new CustomEvent(topicOf(logged.id), { detail: logged })));
  return {
    listen(id, onChange) {
      const topic = topicOf(id);
      const listener = (event: Event) => onChange((event as CustomEvent<HeadChange>).detail);
      target.addEventListener(topic, listener);
      return () => target.removeEventListener(topic, listener);
    },
    publish,
    missed: log.missed,
    policy: {
      name: 'head events',
      result(operation) {
        const { result, params } = operation;
        if (operation.definition?.operation !== 'mutation' || result === undefined || isAsyncIterable(result)) return;
        // What the response cache read of it as it ran, if it is on; else read here, mutations only.
        const fields =
          operation.evictions ??
          evictionsOf({
            schema,
            document: operation.document!,
            variableValues: params.variables ?? undefined,
            operationName: params.operationName ?? undefined,
          } as ExecutionArgs);
        const failed = new Set(result.errors?.map((error) => error.path?.[0]));
        for (const { key, head } of changedFields(fields, result)) {
          if (head === undefined) continue;
          // A deletion that succeeded: the head is gone. One that may have (its answer lost): a change, which each
          // watcher's read settles.
          const span = operation.record?.span.spanContext();
          const cause =
            span === undefined
              ? undefined
              : { traceId: span.traceId, spanId: span.spanId, traceFlags: span.traceFlags };
          publish({
            id: head.id,
            ...(head.deletes && !failed.has(key) ? { deleted: true } : {}),
            ...(cause === undefined ? {} : { cause }),
          });
          options.onPublished?.();
        }
      },
    },
    close() {
      shared?.close();
    },
  };
}
