import type { GraphQLSchema, OperationDefinitionNode } from 'graphql';
import type { Logger } from 'pino';
import { anonymous, type ClientIdentity } from '../instruments/client-awareness.js';
import type { SchemaUsageMetrics, UseTally } from '../instruments/usage-metrics.js';
import type { OperationState } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import { type SelectedCoordinates, selectedCoordinates } from './coordinates.js';

/** A client's selection of one deprecated coordinate is logged at most this often (issue 43: once a minute). */
export const DEPRECATION_LOG_INTERVAL_MS = 60_000;

export interface CoordinateUsageOptions {
  /** The schema operations are validated against: coordinates are its. */
  readonly schema: GraphQLSchema;
  readonly metrics: SchemaUsageMetrics;
  /** Where a client's use of a deprecated coordinate is said (warn). */
  readonly logger: Logger;
  /** The clock of the deprecation log (tests move it). @default performance.now */
  readonly now?: () => number;
}

/**
 * One client's uses of one operation: its tally, and when its deprecated coordinates were last looked at for the log.
 */
interface ClientUse {
  readonly tally: UseTally;
  deprecationSeenAt: number;
}

/**
 * What is kept of one operation of a prepared document: what it selects, and its uses by client (name label, then
 * version label).
 */
interface OperationUse {
  readonly selected: SelectedCoordinates;
  readonly clients: Map<string, Map<string, ClientUse>>;
}

/**
 * One line per client and deprecated coordinate at most every DEPRECATION_LOG_INTERVAL_MS, whichever operation selects
 * it.
 */
function deprecationLog(logger: Logger) {
  /**
   * When each `client name label` + `coordinate` was last logged: bounded by the client labels times the schema's
   * deprecated coordinates.
   */
  const loggedAt = new Map<string, number>();
  return (
    operation: OperationDefinitionNode,
    deprecated: readonly string[],
    client: ClientIdentity,
    at: number,
  ): void => {
    const due = deprecated.filter((coordinate) => {
      const key = `${client.nameLabel}\n${coordinate}`;
      const last = loggedAt.get(key);
      if (last !== undefined && at - last < DEPRECATION_LOG_INTERVAL_MS) return false;
      loggedAt.set(key, at);
      return true;
    });
    if (due.length === 0) return;
    // Names of the document and the schema, and the client's checked, bounded labels: nothing else a client sent.
    logger.warn(
      {
        clientName: client.nameLabel,
        clientVersion: client.versionLabel,
        operationName: operation.name?.value ?? 'anonymous',
        coordinates: due,
      },
      'deprecated schema coordinates selected',
    );
  };
}

/**
 * The document stage's count of schema usage (issue 43), after validation: what each operation
 * selects is read once per operation of a prepared document (coordinates.ts) and kept beside it
 * (a WeakMap keyed by its definition, bounded by the prepared documents' cache), with a tally per
 * client label pair made the first time that client sends it. A request then costs three map reads
 * and one increment (usage-metrics.ts). A subscription's events are its subscriber's one
 * operation, counted as it subscribed, not once per event (the policy does not concern events).
 */
export function useCoordinateUsage(options: CoordinateUsageOptions): Policy {
  const { schema, metrics } = options;
  const now = options.now ?? (() => performance.now());
  const kept = new WeakMap<OperationDefinitionNode, OperationUse>();
  const logDeprecated = deprecationLog(options.logger);
  const useOf = (use: OperationUse, client: ClientIdentity): ClientUse => {
    let versions = use.clients.get(client.nameLabel);
    if (versions === undefined) {
      versions = new Map();
      use.clients.set(client.nameLabel, versions);
    }
    let found = versions.get(client.versionLabel);
    if (found === undefined) {
      found = {
        tally: metrics.tally(use.selected.coordinates, client.nameLabel, client.versionLabel),
        deprecationSeenAt: -Infinity,
      };
      versions.set(client.versionLabel, found);
    }
    return found;
  };
  const count = (operation: OperationState) => {
    const { definition, prepared, request } = operation;
    if (definition === undefined || prepared === undefined) return undefined;
    let use = kept.get(definition);
    if (use === undefined) {
      use = { selected: selectedCoordinates(schema, prepared.document, definition), clients: new Map() };
      kept.set(definition, use);
    }
    if (use.selected.coordinates.length === 0) return undefined;
    const client = request.client ?? anonymous;
    const clientUse = useOf(use, client);
    metrics.count(clientUse.tally);
    const { deprecated } = use.selected;
    if (deprecated.length > 0) {
      // The shared log is asked at most once an interval per operation and client: a hot operation reads one number.
      const at = now();
      if (at - clientUse.deprecationSeenAt >= DEPRECATION_LOG_INTERVAL_MS) {
        clientUse.deprecationSeenAt = at;
        logDeprecated(definition, deprecated, client, at);
      }
    }
    return undefined;
  };
  return { name: 'coordinate usage', document: count };
}
