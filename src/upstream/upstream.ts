import type { CircuitSettings } from './circuit.js';
import { type CircuitEvents, UpstreamCircuits } from './circuits.js';
import { createUpstreamDispatcher, type DispatcherOptions, queuedCallsOf } from './dispatcher.js';
import { RetryBudget, type RetryBudgetSettings } from './retry-budget.js';
import { type CallContext, type TransportOptions, type UpstreamCaller, UpstreamTransport } from './transport.js';

/** The pool's options and the transport's, less what it makes itself (the pool, the breakers, the budget). */
export type UpstreamOptions = DispatcherOptions &
  Omit<TransportOptions, 'dispatcher' | 'circuits' | 'budget'> & {
    /**
     * CIRCUIT_BREAKER_*: the settings of each breaker (the host's and one per operation, circuits.ts); none: no
     * breakers.
     */
    readonly breaker?: CircuitSettings | undefined;
    /** UPSTREAM_RETRY_BUDGET_*: retries across the process's calls; none: only the per-call limit. */
    readonly retryBudget?: RetryBudgetSettings | undefined;
    /** A breaker changed state; a call was refused by one (metrics, logs). */
    readonly circuitEvents?: CircuitEvents;
  };

/**
 * The process-wide side of the upstream layer: one pool, one transport, one set of breakers; callers are per request.
 */
export interface Upstream {
  forRequest(context: CallContext): UpstreamCaller;
  /**
   * A caller on a connection of its own, for the readiness probe: it never waits in the
   * operations' pool (when slow operations hold every connection, a probe queued behind them
   * could not even time out until one came free). Its calls go around the breakers: a probe
   * neither opens nor closes one.
   */
  forProbe(context: CallContext): UpstreamCaller;
  /** The breakers (none without `breaker`). */
  readonly circuits: UpstreamCircuits | undefined;
  /** Calls waiting for a connection of the operations' pool: a pool saturated (load shedding reads it). */
  queuedCalls(): number;
  close(): Promise<void>;
}

export function createUpstream(options: UpstreamOptions): Upstream {
  const dispatcher = createUpstreamDispatcher(options);
  const circuits = options.breaker && new UpstreamCircuits(options.breaker, options.circuitEvents);
  const budget = options.retryBudget && new RetryBudget(options.retryBudget);
  const transport = new UpstreamTransport({ ...options, dispatcher, circuits, budget });
  // Connected on the first probe.
  const probeDispatcher = createUpstreamDispatcher({ ...options, connections: 1 });
  const probe = new UpstreamTransport({
    ...options,
    dispatcher: probeDispatcher,
    dedupe: false,
    onJoined: undefined,
    onRetryRefused: undefined,
  });
  return {
    forRequest: (context) => transport.forRequest(context),
    forProbe: (context) => probe.forRequest(context),
    circuits,
    queuedCalls: queuedCallsOf(dispatcher),
    close: async () => {
      await Promise.all([dispatcher.close(), probeDispatcher.close()]);
    },
  };
}
