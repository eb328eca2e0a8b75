import { Counter, type Registry } from 'prom-client';

/** Metrics of one concern: fields are made after this constructor, so each registers in /metrics order as declared. */
export abstract class MetricGroup {
  constructor(protected readonly registry: Registry) {}

  protected counter<T extends string = string>(name: string, help: string, labelNames: readonly T[] = []): Counter<T> {
    return new Counter({ name, help, labelNames, registers: [this.registry] });
  }
}
