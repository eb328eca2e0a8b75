import { randomUUID } from 'node:crypto';
import type {
  TypedEvent,
  TypedEventListenerOrEventListenerObject,
  TypedEventTarget,
} from '@graphql-yoga/typed-event-target';
import { Cluster, type Redis } from 'ioredis';

export interface RedisEventTargetOptions {
  /** The connection that publishes (a Cluster: the same client that subscribes, its channels sharded). */
  readonly publisher: Redis | Cluster;
  /** The connection in subscriber mode (one node or Sentinels: a connection of its own). */
  readonly subscriber: Redis | Cluster;
  /** Every channel's name starts with it, so one Redis may serve other applications. @default 'gw:ev:' */
  readonly prefix?: string;
  /** An event Redis did not take (it is delivered in this process all the same). */
  readonly onPublishFailed?: (error: unknown) => void;
}

/** What travels on a channel: the publishing process, so it skips its own, and the event's detail. */
interface Message {
  readonly from: string;
  readonly detail: unknown;
}

type Listener<E extends TypedEvent> = TypedEventListenerOrEventListenerObject<E>;

const call = <E extends TypedEvent>(listener: Listener<E>, event: E) =>
  typeof listener === 'function' ? listener(event) : listener.handleEvent(event);

/**
 * The event target of `createPubSub` (@graphql-yoga/subscription) across processes, over Redis
 * pub/sub on every topology: @graphql-yoga/redis-event-target's shape (a channel per topic,
 * subscribed while it has listeners, the event's detail as JSON), with what that one lacks:
 *
 * - on a Cluster, sharded pub/sub (SPUBLISH, SSUBSCRIBE: a channel lives on its name's slot, so an
 *   event costs one shard rather than every node);
 * - an event is delivered in its own process at once, and published for the others, which is what
 *   a process whose Redis is down still does (its subscribers miss only the other replicas' events);
 * - every channel with listeners is subscribed again whenever the subscriber connection is ready
 *   (a reconnect, the new master after a Sentinel failover): a subscription asked for while it was
 *   down is not lost.
 */
export function redisEventTarget<E extends TypedEvent>(
  options: RedisEventTargetOptions,
): TypedEventTarget<E> & { close(): void } {
  const { publisher, subscriber, prefix = 'gw:ev:', onPublishFailed } = options;
  const sharded = subscriber instanceof Cluster;
  const from = randomUUID();
  const listeners = new Map<string, Set<Listener<E>>>();

  const deliver = (event: E) => {
    for (const listener of listeners.get(event.type) ?? []) call(listener, event);
  };
  const subscribe = (topics: string[]) => {
    if (topics.length === 0) return;
    const channels = topics.map((topic) => prefix + topic);
    // Each channel on its own: a Cluster's channels live on different slots. A failure is mended at the next `ready`.
    for (const channel of channels)
      void (sharded ? subscriber.ssubscribe(channel) : subscriber.subscribe(channel)).catch(() => undefined);
  };
  const unsubscribe = (topic: string) =>
    void (sharded ? subscriber.sunsubscribe(prefix + topic) : subscriber.unsubscribe(prefix + topic)).catch(
      () => undefined,
    );

  const onMessage = (channel: string, text: string) => {
    if (!channel.startsWith(prefix)) return;
    let message: Message;
    try {
      message = JSON.parse(text) as Message;
    } catch {
      return;
    }
    if (message.from === from) return;
    deliver(new CustomEvent(channel.slice(prefix.length), { detail: message.detail }) as unknown as E);
  };
  const onReady = () => subscribe([...listeners.keys()]);
  subscriber.on(sharded ? 'smessage' : 'message', onMessage);
  subscriber.on('ready', onReady);

  return {
    addEventListener(type, listener) {
      if (listener === null) return;
      let set = listeners.get(type);
      if (set === undefined) {
        set = new Set();
        listeners.set(type, set);
        subscribe([type]);
      }
      set.add(listener as Listener<E>);
    },
    removeEventListener(type, listener) {
      const set = listeners.get(type);
      if (set === undefined || listener === null) return;
      set.delete(listener as Listener<E>);
      if (set.size > 0) return;
      listeners.delete(type);
      unsubscribe(type);
    },
    dispatchEvent(event) {
      deliver(event);
      const text = JSON.stringify({ from, detail: event.detail } satisfies Message);
      const channel = prefix + event.type;
      (sharded ? (publisher as Cluster).spublish(channel, text) : publisher.publish(channel, text)).catch(
        (error: unknown) => onPublishFailed?.(error),
      );
      return true;
    },
    close() {
      subscriber.off(sharded ? 'smessage' : 'message', onMessage);
      subscriber.off('ready', onReady);
      listeners.clear();
    },
  };
}
