import { setMaxListeners } from 'node:events';
import type { ExecutionArgs, GraphQLSchema } from 'graphql';
import { isAsyncIterable } from 'graphql-yoga';
import { isPrepared } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import type { HeadChange } from '../request-state.js';
import { changedFields, evictionsOf } from '../response-cache/evictions.js';
import { clusterEventTarget } from '../shared-state/cluster-events.js';
import { redisEventTarget } from '../shared-state/redis-events.js';
import type { SharedRedis } from '../shared-state/shared-redis.js';
import { changeLog } from './change-log.js';

/** The event type of head `id`'s changes (through Redis, `gw:ev:headChanged:<id>`): `createPubSub`'s naming, kept. */
const topicOf = (id: string) => `headChanged:${id}`;

export interface HeadEventsOptions {
  readonly schema: GraphQLSchema;
  /** REDIS_URL's connection: events reach every replica; without it, this process's watchers only. */
  readonly redis?: SharedRedis | undefined;
  /** An event Redis did not take (its own process's watchers have it all the same). */
  readonly onPublishFailed?: (error: unknown) => void;
  /** Told of each change a write published (metrics). */
  readonly onPublished?: () => void;
  /** SUBSCRIPTION_REPLAY_MS: how long changes are kept for SSE clients that reconnect; 0: none. */
  readonly replayMs: number;
  /** One worker of several (WORKERS>1): without Redis, events go to the other workers through the primary. */
  readonly workers?: boolean | undefined;
}

export interface HeadEvents {
  /** Calls `onChange` with each change to head `id` until the returned function is called (no queue of its own). */
  listen(id: string, onChange: (change: HeadChange) => void): () => void;
  /** Logs a change (giving its event id) and tells every watcher, here and (with REDIS_URL) on every replica. */
  publish(change: Omit<HeadChange, 'eventId' | 'at'>): void;
  /** What a subscriber whose last event was `lastEventId` missed of head `id` (change-log.ts). */
  missed(id: string, lastEventId: string): Promise<HeadChange | undefined>;
  /** A result step: publishes a mutation's heads once it may have changed them. */
  readonly policy: Policy;
  close(): void;
}

/**
 * The heads writes may have changed, told to their watchers: a mutation field naming a head tells it on the outcomes
 * that evict the response cache (response-cache/evictions.ts). An event is the head's id alone: each watcher reads it
 * with its own token (finding it gone if deleted). A mutation answered in parts (`@defer`) tells nothing.
 */
export function useHeadEvents(options: HeadEventsOptions): HeadEvents {
  const { schema, redis } = options;
  const log = changeLog({ replayMs: options.replayMs, redis });
  // Without Redis, workers pass events through the primary, each keeping what it hears for replay.
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
  const target = (shared ?? new EventTarget()) as EventTarget;
  // No cap on a topic's listeners: a head may have thousands of watchers (Node warns past ten).
  if (shared === undefined) setMaxListeners(0, target);
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
        if (!isPrepared(operation) || operation.definition.operation !== 'mutation') return;
        if (result === undefined || isAsyncIterable(result)) return;
        // What the response cache read of it as it ran, if it is on; else read here, mutations only.
        const fields =
          operation.evictions ??
          evictionsOf({
            schema,
            document: operation.document,
            variableValues: params.variables ?? undefined,
            operationName: params.operationName ?? undefined,
          } as ExecutionArgs);
        const failed = new Set(result.errors?.map((error) => error.path?.[0]));
        const span = operation.record?.span.spanContext();
        const cause = span && { cause: { traceId: span.traceId, spanId: span.spanId, traceFlags: span.traceFlags } };
        for (const { key, head } of changedFields(fields, result)) {
          if (head === undefined) continue;
          // A deletion that succeeded: gone. One that may have (answer lost): a change, each watcher's read settles.
          publish({ id: head.id, ...(head.deletes && !failed.has(key) ? { deleted: true } : {}), ...cause });
          options.onPublished?.();
        }
      },
    },
    close() {
      shared?.close();
    },
  };
}
