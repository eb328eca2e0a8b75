import { Histogram, type HistogramConfiguration, type LabelValues } from 'prom-client';

const BATCH = 256;

/**
 * Observations handed to prom-client together, at each scrape or every BATCH: it validates and hashes the labels
 * and finds the bucket on each, which per request, between its other work, costs several times what it does in a loop.
 */
export class QueuedObservations<T extends string> {
  #labels: LabelValues<T>[] = [];
  #values: number[] = [];

  private constructor(private readonly histogram: Histogram<T>) {}

  /** A histogram made of `config`, observed through a queue its scrape (`collect`) flushes. */
  static histogram<T extends string>(config: HistogramConfiguration<T>): QueuedObservations<T> {
    const queued: QueuedObservations<T> = new QueuedObservations(
      new Histogram({ ...config, collect: () => queued.flush() }),
    );
    return queued;
  }

  observe(labels: LabelValues<T>, value: number): void {
    this.#labels.push(labels);
    if (this.#values.push(value) >= BATCH) this.flush();
  }

  flush(): void {
    const [labels, values] = [this.#labels, this.#values];
    [this.#labels, this.#values] = [[], []];
    for (let i = 0; i < values.length; i++) {
      try {
        this.histogram.observe(labels[i]!, values[i]!);
      } catch {
        // One observation prom-client refuses (a value not finite) is dropped, not kept to fail every scrape.
      }
    }
  }
}
