import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

// WORKERS>1: a scrape reaches one worker, which asks the primary; that sums every worker's registry with
// prom-client's AggregatorRegistry (over its own cluster messages). Only the ask and the answer are ours.
const SCRAPE = 'gateway:scrape';
const SCRAPED = 'gateway:scraped';

interface ScrapeMessage {
  type: typeof SCRAPE | typeof SCRAPED;
  id: number;
  text?: string; // absent when the aggregation failed
}

const isMessage = (message: unknown, type: ScrapeMessage['type']): message is ScrapeMessage =>
  typeof message === 'object' && message !== null && (message as ScrapeMessage).type === type;

/** In the cluster primary: answers a worker's scrape with the metrics of all workers, summed. */
export function aggregateWorkerMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!isMessage(message, SCRAPE)) return;
    const answer = (text?: string) => {
      if (worker.isConnected()) worker.send({ type: SCRAPED, id: message.id, text } satisfies ScrapeMessage);
    };
    aggregator.clusterMetrics().then(answer, () => answer());
  });
}

/** In a worker: the whole group's scrape; rejects if the aggregation fails (prom-client gives up after 5 s). */
export function scrapeWorkerGroup(registry: Registry): () => Promise<string> {
  AggregatorRegistry.setRegistries([registry]);
  // Constructing one is what makes this worker answer the primary's collection requests.
  new AggregatorRegistry();
  const waiting = new Map<number, { resolve: (text: string) => void; reject: (error: Error) => void }>();
  let nextId = 0;
  process.on('message', (message: unknown) => {
    if (!isMessage(message, SCRAPED)) return;
    const waiter = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.text === undefined) waiter?.reject(new Error('metrics aggregation failed'));
    else waiter?.resolve(message.text);
  });
  process.on('disconnect', () => {
    for (const waiter of waiting.values()) waiter.reject(new Error('cluster primary gone'));
    waiting.clear();
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      if (process.send === undefined || !process.connected) return reject(new Error('cluster primary gone'));
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      process.send({ type: SCRAPE, id } satisfies ScrapeMessage);
    });
}
