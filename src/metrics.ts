import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { scrapeWorkerGroup } from './cluster-metrics.js';
import type { UpstreamAttempt } from './upstream/transport.js';

/**
 * The gateway's Prometheus metrics, in a registry of its own (not prom-client's global one) so
 * tests and several gateways in one process never share counters.
 */
export class GatewayMetrics {
  readonly registry = new Registry();

  readonly operations = new Histogram({
    name: 'gateway_operation_duration_seconds',
    help: 'GraphQL operations by name, type and outcome (ok, error, refused), with their duration.',
    labelNames: ['operation', 'type', 'outcome'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
    registers: [this.registry],
  });

  readonly upstreamCalls = new Histogram({
    name: 'gateway_upstream_call_duration_seconds',
    help: 'Upstream call attempts by operation and status (or error code), with their duration.',
    labelNames: ['operation', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
  });

  readonly upstreamRetries = new Counter({
    name: 'gateway_upstream_retries_total',
    help: 'Upstream call attempts that were retries of an idempotent read.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly refusals = new Counter({
    name: 'gateway_refusals_total',
    help: 'Requests refused before execution, by the limit that refused them.',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  readonly sharedStateFallbacks = new Counter({
    name: 'gateway_shared_state_fallbacks_total',
    help: 'Operations whose rate limits or APQ lookup used process memory because Redis (REDIS_URL) did not answer.',
    labelNames: ['store'] as const,
    registers: [this.registry],
  });

  readonly inFlight = new Gauge({
    name: 'gateway_operations_in_flight',
    help: 'GraphQL operations being executed now.',
    registers: [this.registry],
  });

  /** The Prometheus text /metrics answers: this process's registry, or in a cluster worker the sum over all workers. */
  readonly scrape: () => Promise<string>;

  /**
   * @param options.clusterWorker this process is one of several workers behind one port
   *   (`WORKERS>1`): a scrape asks the cluster primary for the sum over all workers.
   */
  constructor(options: { defaultMetrics?: boolean; clusterWorker?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.scrape = options.clusterWorker === true ? scrapeWorkerGroup(this.registry) : () => this.registry.metrics();
  }

  /** Feeds the transport's per-attempt hook. */
  recordAttempt = (attempt: UpstreamAttempt): void => {
    this.upstreamCalls.observe({ operation: attempt.operation, status: attempt.status ?? attempt.code ?? 'error' }, attempt.durationMs / 1000);
    if (attempt.retry) this.upstreamRetries.inc({ operation: attempt.operation });
  };
}
