import { type Aggregator, Counter, Gauge, type Registry } from 'prom-client';

/** Metrics of one concern: fields are made after this constructor, so each registers in /metrics order as declared. */
export abstract class MetricGroup {
  constructor(readonly registry: Registry) {}

  protected counter<T extends string = string>(name: string, help: string, labelNames: readonly T[] = []): Counter<T> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }

  /** A gauge set to what `read` says at each scrape; `aggregator`: how a cluster's workers' values combine. */
  protected gauge(name: string, help: string, read: () => number, aggregator: Aggregator = 'sum'): void {
    const gauge: Gauge = new Gauge({
      name,
      help,
      aggregator,
      registers: [this.registry],
      collect: () => gauge.set(read()),
    });
  }
}
