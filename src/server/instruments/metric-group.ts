import { Counter, type Registry } from 'prom-client';

/**
 * A group of the gateway's metrics, of one concern, in the gateway's registry: a group's fields
 * are made after this constructor has run, so each registers itself as it is made, in the order
 * the group declares them (the order /metrics shows).
 */
export abstract class MetricGroup {
  constructor(protected readonly registry: Registry) {}

  /** A counter without labels, in the registry. */
  protected counter(name: string, help: string): Counter {
    return new Counter({ name, help, registers: [this.registry] });
  }
}
