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

/** @graphql-yoga/redis-event-target's shape, sharded on a Cluster, delivered here at once, resubscribed at `ready`. */
export function redisEventTarget<E extends TypedEvent>(
  options: RedisEventTargetOptions,
): TypedEventTarget<E> & { close(): void } {
  const { publisher, subscriber, prefix = 'gw:ev:', onPublishFailed } = options;
  const sharded = subscriber instanceof Cluster;
  const from = randomUUID();
  const listeners = new Map<string, Set<Listener<E>>>();

  const deliver = (event: E) => {
    for (const listener of listeners.get(event.type) ?? [])
      if (typeof listener === 'function') listener(event);
      else listener.handleEvent(event);
  };
  // Each channel on its own: a Cluster's channels live on different slots. A failure is mended at the next `ready`.
  const subscribe = (topics: Iterable<string>) => {
    for (const topic of topics)
      void (sharded ? subscriber.ssubscribe(prefix + topic) : subscriber.subscribe(prefix + topic)).catch(() => {});
  };

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
  const onReady = () => subscribe(listeners.keys());
  subscriber.on(sharded ? 'smessage' : 'message', onMessage);
  subscriber.on('ready', onReady);

  return {
    addEventListener(type, listener) {
      if (listener === null) return;
      if (!listeners.has(type)) {
        listeners.set(type, new Set());
        subscribe([type]);
      }
      listeners.get(type)!.add(listener as Listener<E>);
    },
    removeEventListener(type, listener) {
      const set = listeners.get(type);
      if (set === undefined || listener === null) return;
      set.delete(listener as Listener<E>);
      if (set.size > 0) return;
      listeners.delete(type);
      void (sharded ? subscriber.sunsubscribe(prefix + type) : subscriber.unsubscribe(prefix + type)).catch(() => {});
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
