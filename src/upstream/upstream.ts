import { UpstreamCircuit, type CircuitSettings, type CircuitStateName } from './circuit.js';
import { createUpstreamDispatcher, queuedCallsOf, type DispatcherOptions } from './dispatcher.js';
import { RetryBudget, type RetryBudgetSettings } from './retry-budget.js';
import { UpstreamTransport, type CallContext, type TransportOptions, type UpstreamCaller } from './transport.js';

/** The pool's options and the transport's, less what it makes itself (the pool, the breaker, the budget). */
export type UpstreamOptions = DispatcherOptions &
  Omit<TransportOptions, 'dispatcher' | 'circuit' | 'budget'> & {
    /** CIRCUIT_BREAKER_*: one breaker for the process's calls; none: no breaker. */
    readonly breaker?: CircuitSettings | undefined;
    /** UPSTREAM_RETRY_BUDGET_*: retries across the process's calls; none: only the per-call limit. */
    readonly retryBudget?: RetryBudgetSettings | undefined;
    /** The breaker changed state (metrics). */
    readonly onCircuitChange?: (state: CircuitStateName) => void;
  };

/** The process-wide side of the upstream layer: one pool, one transport, one breaker; callers are per request. */
export interface Upstream {
  forRequest(context: CallContext): UpstreamCaller;
  /**
   * A caller on a connection of its own, for the readiness probe: it never waits in the
   * operations' pool (when slow operations hold every connection, a probe queued behind them
   * could not even time out until one came free). Its calls go around the breaker: a probe
   * neither opens nor closes it.
   */
  forProbe(context: CallContext): UpstreamCaller;
  /** Calls waiting for a connection of the operations' pool: a pool saturated (load shedding reads it). */
  queuedCalls(): number;
  /** Whether the breaker refuses calls now (open, before its probe is due; or its probe in flight). */
  circuitRefuses(): boolean;
  readonly circuitState: CircuitStateName;
  close(): Promise<void>;
}

export function createUpstream(options: UpstreamOptions): Upstream {
  const dispatcher = createUpstreamDispatcher(options);
  const circuit = options.breaker && new UpstreamCircuit(options.breaker, options.onCircuitChange);
  const budget = options.retryBudget && new RetryBudget(options.retryBudget);
  const transport = new UpstreamTransport({ ...options, dispatcher, circuit, budget });
  // Connected on the first probe.
  const probeDispatcher = createUpstreamDispatcher({ ...options, connections: 1 });
  const probe = new UpstreamTransport({ ...options, dispatcher: probeDispatcher, dedupe: false, onJoined: undefined, onRetryRefused: undefined });
  return {
    forRequest: (context) => transport.forRequest(context),
    forProbe: (context) => probe.forRequest(context),
    queuedCalls: queuedCallsOf(dispatcher),
    circuitRefuses: () => circuit?.refuses() ?? false,
    get circuitState() {
      return circuit?.state ?? 'closed';
    },
    close: async () => {
      await Promise.all([dispatcher.close(), probeDispatcher.close()]);
    },
  };
}
