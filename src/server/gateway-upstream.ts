import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Tracing } from '../telemetry/tracing.js';
import type { CircuitStateName } from '../upstream/circuit.js';
import type { CircuitName } from '../upstream/circuits.js';
import type { UpstreamAttempt } from '../upstream/transport.js';
import { createUpstream, type Upstream } from '../upstream/upstream.js';
import type { GatewayMetrics } from './instruments/metrics.js';
import type { KnownTokens } from './traffic/known-tokens.js';

export interface UpstreamWatchers {
  readonly logger: Logger;
  readonly metrics: GatewayMetrics;
  /** Sees every upstream call attempt, retries included, after the metrics have. */
  readonly onAttempt?: ((attempt: UpstreamAttempt) => void) | undefined;
}

const circuitChanges: Record<CircuitStateName, string> = {
  open: 'upstream circuit breaker opened',
  closed: 'upstream circuit breaker closed',
  half_open: 'upstream circuit breaker half-open: one probe call let through',
};

/** A line per state change of an upstream breaker (the host's, or an operation's): opening at warn, the rest info. */
function logCircuitChange(logger: Logger, circuit: CircuitName, state: CircuitStateName): void {
  const fields = circuit === 'host' ? { circuit, state } : { circuit: 'operation', operation: circuit, state };
  logger[state === 'open' ? 'warn' : 'info'](fields, circuitChanges[state]);
}

/**
 * The upstream pool as the operator configured it: its attempts, breakers and shared calls reported in the metrics and
 * the log, each token it accepted learnt.
 */
export function instrumentedUpstream(
  config: Config,
  upstreamUrl: string,
  options: UpstreamWatchers,
  tracing: Tracing,
  knownTokens: KnownTokens,
): Upstream {
  const { logger, metrics, onAttempt } = options;
  return createUpstream({
    baseUrl: upstreamUrl,
    routes: config.routes,
    timeoutMs: config.upstreamTimeoutMs,
    connections: config.upstreamConnections,
    keepAliveTimeoutMs: config.upstreamKeepAliveMs,
    maxResponseBytes: config.upstreamMaxResponseBytes,
    breaker: config.resilience.breaker,
    retryBudget: config.resilience.retryBudget,
    dedupe: config.resilience.dedupe,
    tracing,
    onAttempt:
      onAttempt === undefined
        ? metrics.recordAttempt
        : (attempt) => {
            metrics.recordAttempt(attempt);
            onAttempt(attempt);
          },
    circuitEvents: {
      onChange: (circuit, state) => {
        metrics.recordCircuitState(circuit, state);
        logCircuitChange(logger, circuit, state);
      },
      onRefused: metrics.recordCircuitRefusal,
    },
    onJoined: () => metrics.upstreamCallsJoined.inc(),
    onRetryRefused: () => metrics.upstreamRetriesRefused.inc(),
    onTokenAccepted: knownTokens.learn,
  });
}
