import type { GraphQLSchema, OperationDefinitionNode } from 'graphql';
import type { Logger } from 'pino';
import { anonymous, type ClientIdentity } from '../instruments/client-awareness.js';
import type { SchemaUsageMetrics, UseTally } from '../instruments/usage-metrics.js';
import type { OperationState } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import { type SelectedCoordinates, selectedCoordinates } from './coordinates.js';

/** A client's selection of one deprecated coordinate is logged at most this often. */
export const DEPRECATION_LOG_INTERVAL_MS = 60_000;

export interface CoordinateUsageOptions {
  readonly schema: GraphQLSchema;
  readonly metrics: SchemaUsageMetrics;
  readonly logger: Logger;
  /** The clock of the deprecation log (tests move it). @default performance.now */
  readonly now?: () => number;
}

/** One client's uses of one operation, and when its deprecated coordinates were last looked at for the log. */
interface ClientUse {
  readonly tally: UseTally;
  deprecationSeenAt: number;
}

interface OperationUse {
  readonly selected: SelectedCoordinates;
  readonly clients: Map<string, ClientUse>;
}

/** One line per client and deprecated coordinate at most every DEPRECATION_LOG_INTERVAL_MS, whichever operation. */
function deprecationLog(logger: Logger) {
  // By `client name label` + `coordinate`: bounded by the client labels times the schema's deprecated coordinates.
  const loggedAt = new Map<string, number>();
  return (operation: OperationDefinitionNode, deprecated: readonly string[], client: ClientIdentity, at: number) => {
    const due = deprecated.filter((coordinate) => {
      const key = `${client.nameLabel}\n${coordinate}`;
      const last = loggedAt.get(key);
      if (last !== undefined && at - last < DEPRECATION_LOG_INTERVAL_MS) return false;
      loggedAt.set(key, at);
      return true;
    });
    if (due.length === 0) return;
    // Names of the document and the schema, and the client's checked, bounded labels: nothing else a client sent.
    const { nameLabel: clientName, versionLabel: clientVersion } = client;
    logger.warn(
      { clientName, clientVersion, operationName: operation.name?.value ?? 'anonymous', coordinates: due },
      'deprecated schema coordinates selected',
    );
  };
}

/**
 * Counts schema usage: an operation's coordinates are read once (coordinates.ts), so a request costs a few map reads
 * and one increment (usage-metrics.ts). A subscription counts once, as it subscribed, not per event.
 */
export function useCoordinateUsage(options: CoordinateUsageOptions): Policy {
  const { schema, metrics } = options;
  const now = options.now ?? (() => performance.now());
  const kept = new WeakMap<OperationDefinitionNode, OperationUse>();
  const logDeprecated = deprecationLog(options.logger);
  // Labels hold no newline (client-awareness.ts): the pair is one key.
  const useOf = (use: OperationUse, { nameLabel, versionLabel }: ClientIdentity): ClientUse => {
    const key = `${nameLabel}\n${versionLabel}`;
    let found = use.clients.get(key);
    if (found === undefined) {
      found = { tally: metrics.tally(use.selected.coordinates, nameLabel, versionLabel), deprecationSeenAt: -Infinity };
      use.clients.set(key, found);
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
    if (deprecated.length === 0) return undefined;
    // The shared log is asked at most once an interval per operation and client: a hot operation reads one number.
    const at = now();
    if (at - clientUse.deprecationSeenAt < DEPRECATION_LOG_INTERVAL_MS) return undefined;
    clientUse.deprecationSeenAt = at;
    logDeprecated(definition, deprecated, client, at);
    return undefined;
  };
  return { name: 'coordinate usage', document: count };
}
