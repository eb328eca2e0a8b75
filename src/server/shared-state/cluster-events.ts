import cluster, { type Worker } from 'node:cluster';
import { setMaxListeners } from 'node:events';

/** An event on its way between the workers of one process group (`WORKERS>1`), through the primary. */
interface EventMessage {
  readonly type: 'gateway:event';
  readonly topic: string;
  readonly detail: unknown;
}

const EVENT = 'gateway:event';

const isEventMessage = (message: unknown): message is EventMessage =>
  typeof message === 'object' && message !== null && (message as EventMessage).type === EVENT;

/** In the cluster primary: hands each worker's event to every other worker. */
export function relayWorkerEvents(): void {
  cluster.on('message', (from: Worker, message: unknown) => {
    if (!isEventMessage(message)) return;
    for (const worker of Object.values(cluster.workers ?? {}))
      if (worker !== undefined && worker !== from && worker.isConnected()) worker.send(message);
  });
}

/** A worker's event target without Redis: events reach every worker (`relayWorkerEvents`), this one's at once. */
export function clusterEventTarget(onRemote: (detail: unknown) => void): EventTarget & { close(): void } {
  const target = new EventTarget();
  // A head may have thousands of watchers: no cap on a topic's listeners (Node warns past ten).
  setMaxListeners(0, target);
  const onMessage = (message: unknown) => {
    if (!isEventMessage(message)) return;
    onRemote(message.detail);
    target.dispatchEvent(new CustomEvent(message.topic, { detail: message.detail }));
  };
  process.on('message', onMessage);
  return {
    addEventListener: target.addEventListener.bind(target),
    removeEventListener: target.removeEventListener.bind(target),
    dispatchEvent(event) {
      const delivered = target.dispatchEvent(event);
      process.send?.({ type: EVENT, topic: event.type, detail: (event as CustomEvent).detail } satisfies EventMessage);
      return delivered;
    },
    close: () => void process.off('message', onMessage),
  };
}
