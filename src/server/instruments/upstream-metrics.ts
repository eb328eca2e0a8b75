import { Gauge, type Registry } from 'prom-client';
import { type OperationName, operationNames } from '../../domain/operations.js';
import type { CircuitStateName } from '../../upstream/circuit.js';
import type { CircuitName } from '../../upstream/circuits.js';
import type { UpstreamAttempt } from '../../upstream/transport.js';
import { MetricGroup } from './metric-group.js';
import { QueuedObservations } from './queued-observations.js';

/** The upstream's calls and retries, the breakers' states and refusals, the calls shared and the retries not made. */
export class UpstreamMetrics extends MetricGroup {
  readonly #queuedCalls = QueuedObservations.histogram({
    name: 'gateway_upstream_call_duration_seconds',
    help: 'Upstream call attempts by operation and status (or error code), with their duration.',
    labelNames: ['operation', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
  });
  readonly #retries = this.counter(
    'gateway_upstream_retries_total',
    'Upstream call attempts that were retries of an idempotent read.',
    ['operation'],
  );
  readonly #circuitChanges = this.counter(
    'gateway_upstream_circuit_state_changes_total',
    "Changes of an upstream operation's circuit breaker, by operation and the state entered (open, half_open, closed).",
    ['operation', 'state'],
  );
  readonly #circuitState = new Gauge({
    name: 'gateway_upstream_circuit_state',
    help: "Each upstream operation's circuit breaker now, by operation: 0 closed, 1 open (its calls fail at once, nothing sent), 2 half-open (one probe call in flight).",
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });
  readonly #hostCircuitChanges = this.counter(
    'gateway_upstream_host_circuit_state_changes_total',
    "Changes of the upstream host's circuit breaker (failed connections; it refuses every operation's calls), by the state entered.",
    ['state'],
  );
  readonly #hostCircuitState = new Gauge({
    name: 'gateway_upstream_host_circuit_state',
    help: "The upstream host's circuit breaker now: 0 closed, 1 open (every call fails at once, nothing sent), 2 half-open (one probe call in flight).",
    registers: [this.registry],
  });
  readonly #circuitRefusals = this.counter(
    'gateway_upstream_circuit_refusals_total',
    "Upstream calls not sent because their operation's or the host's circuit breaker was open, by operation.",
    ['operation'],
  );
  readonly callsJoined = this.counter(
    'gateway_upstream_calls_joined_total',
    'Upstream GETs not sent because the same caller had the same one in flight: the request shared its answer (UPSTREAM_DEDUPE).',
  );
  readonly retriesRefused = this.counter(
    'gateway_upstream_retries_refused_total',
    'Retries of upstream GETs not made because the retry budget (UPSTREAM_RETRY_BUDGET_*) was spent.',
  );

  constructor(registry: Registry) {
    super(registry);
    // Every breaker's series exists from the start (closed, nothing refused): the operations are a fixed set.
    this.#hostCircuitState.set(0);
    for (const operation of operationNames) {
      this.#circuitState.set({ operation }, 0);
      this.#circuitRefusals.inc({ operation }, 0);
    }
  }

  /** Feeds the transport's per-attempt hook. */
  readonly recordAttempt = ({ operation, status, code, durationMs, retry }: UpstreamAttempt): void => {
    this.#queuedCalls.observe({ operation, status: status ?? code ?? 'error' }, durationMs / 1000);
    if (retry) this.#retries.inc({ operation });
  };

  readonly recordCircuitState = (circuit: CircuitName, state: CircuitStateName): void => {
    const value = state === 'closed' ? 0 : state === 'open' ? 1 : 2;
    if (circuit === 'host') {
      this.#hostCircuitChanges.inc({ state });
      this.#hostCircuitState.set(value);
    } else {
      this.#circuitChanges.inc({ operation: circuit, state });
      this.#circuitState.set({ operation: circuit }, value);
    }
  };

  readonly recordCircuitRefusal = (operation: OperationName): void => this.#circuitRefusals.inc({ operation });
}
