import type { Plugin } from 'graphql-yoga';
import { composed } from '../plugin-kit/composed.js';
import { useOperationTelemetry, type OperationTelemetryOptions } from './operation-telemetry.js';
import type { ProbeSources } from '../probes/answers.js';
import { useProbes } from '../probes/routes.js';
import { useRequestIds } from './request-ids.js';

export type OperabilityOptions = OperationTelemetryOptions & {
  /** Whether the upstream answered recently (cached by the caller). */
  readonly ready: () => Promise<boolean>;
  readonly notReadyBecause?: ProbeSources['notReadyBecause'];
};

/**
 * What an operator reads of the gateway on its public port: /health, /ready and /metrics
 * (probe-routes.ts); per GraphQL operation its span, metrics and log line
 * (operation-telemetry.ts); and the `x-request-id` of every GraphQL answer (request-ids.ts).
 */
export function useOperability(options: OperabilityOptions): Plugin {
  return composed([
    useProbes({ ready: options.ready, notReadyBecause: options.notReadyBecause, metrics: options.metrics }),
    useOperationTelemetry(options),
    // After the telemetry: an operation it finishes in onResponse may have made the id this echoes.
    useRequestIds(),
  ]);
}
