import { type OperationName, operationNames } from '../domain/operations.js';
import { type CircuitSettings, type CircuitStateName, UpstreamCircuit, type Verdict } from './circuit.js';
import { CIRCUIT_OPEN } from './errors.js';
import { Failure, isConnectionFault, isUpstreamFault } from './failures.js';

/** A breaker of the upstream: one contract operation's, or the host's. */
export type CircuitName = OperationName | 'host';

export interface CircuitEvents {
  /** A breaker changed state (metrics, one log line). */
  readonly onChange?: ((circuit: CircuitName, state: CircuitStateName) => void) | undefined;
  /** An operation's call was refused by an open breaker, nothing sent (metrics). */
  readonly onRefused?: ((operation: OperationName) => void) | undefined;
}

/** The host's verdict: only a failed connection is its failure; any answer, a 5xx or one late, means it is there. */
const hostVerdict = (failure: Failure): Verdict =>
  failure.extra.cutShort === true ? 'nothing' : isConnectionFault(failure) ? 'failure' : 'success';

/**
 * An operation's verdict: its route's faults (5xx, its call's own timeout); a failed connection is the host's, and says
 * nothing of the route.
 */
const operationVerdict = (failure: Failure): Verdict =>
  failure.extra.cutShort === true || isConnectionFault(failure)
    ? 'nothing'
    : isUpstreamFault(failure)
      ? 'failure'
      : 'success';

/**
 * The upstream's circuit breakers, one set per process, shared by every request: one per contract
 * operation (a bounded set, as Apollo Router, Hive Router and Cosmo keep one per subgraph or
 * source) and one for the host, each with the same settings (CIRCUIT_BREAKER_*). An operation's
 * faults open its breaker only: a failing route no longer refuses the calls of the healthy ones.
 * A failed connection says the host is down for every operation: it counts in the host's breaker,
 * which every call passes too (its window sees every attempt), so the host opens for all of them
 * at once. (Fanning each connection failure out to every operation's breaker instead would need a
 * call run through each of them, cockatiel counting only the calls it runs, and would turn their
 * probes as well.) A call is sent only when both its breakers let it through; an attempt runs
 * through the host's breaker, then its operation's, each counting what its verdict says.
 */
export class UpstreamCircuits {
  readonly #host: UpstreamCircuit;
  readonly #operations: Readonly<Record<OperationName, UpstreamCircuit>>;
  readonly #onRefused: ((operation: OperationName) => void) | undefined;

  constructor(settings: CircuitSettings, events: CircuitEvents = {}) {
    const { onChange } = events;
    const changes = (circuit: CircuitName) =>
      onChange === undefined ? undefined : (state: CircuitStateName) => onChange(circuit, state);
    this.#host = new UpstreamCircuit(settings, hostVerdict, changes('host'));
    this.#operations = Object.fromEntries(
      operationNames.map((operation) => [
        operation,
        new UpstreamCircuit(settings, operationVerdict, changes(operation)),
      ]),
    ) as Record<OperationName, UpstreamCircuit>;
    this.#onRefused = events.onRefused;
  }

  /** Whether a call of `operation` must fail now, unsent: the host's breaker or its own refuses it. */
  refuses(operation: OperationName): boolean {
    return this.#host.refuses() || this.#operations[operation].refuses();
  }

  /** What a call the breakers refuse fails as (UPSTREAM_UNAVAILABLE, nothing sent, safe to retry), counted. */
  refusal(operation: OperationName): Failure {
    this.#onRefused?.(operation);
    const refusing = [this.#host, this.#operations[operation]].filter((circuit) => circuit.refuses());
    // The host's first: a call it refuses says the upstream is unreachable, whatever its operation's says.
    const circuit = this.#host.refuses() ? 'host' : 'operation';
    return new Failure('UPSTREAM_UNAVAILABLE', undefined, false, {
      reason: CIRCUIT_OPEN,
      circuit,
      retryAfterMs: Math.max(0, ...refusing.map((refused) => refused.retryAfterMs())),
    });
  }

  /** Whether a retry of `operation` may be sent: both its breakers closed (never during a probe). */
  closed(operation: OperationName): boolean {
    return this.#host.state === 'closed' && this.#operations[operation].state === 'closed';
  }

  /**
   * Runs one attempt of `operation` through the host's breaker and its own (when `refuses` said no, in the same tick).
   */
  execute<O>(operation: OperationName, attempt: () => Promise<O>): Promise<O | Failure> {
    return this.#host.execute(() => this.#operations[operation].execute(attempt));
  }

  /** One breaker's state now. */
  stateOf(circuit: CircuitName): CircuitStateName {
    return (circuit === 'host' ? this.#host : this.#operations[circuit]).state;
  }

  /**
   * Whether no call can be sent, whatever its operation: the host's breaker refuses (`host`), or every operation's does
   * (`operations`).
   */
  refusingAll(): 'host' | 'operations' | undefined {
    if (this.#host.refuses()) return 'host';
    return operationNames.every((operation) => this.#operations[operation].refuses()) ? 'operations' : undefined;
  }
}
