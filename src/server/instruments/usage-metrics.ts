import { Counter } from 'prom-client';
import { MetricGroup } from './metric-group.js';

/** The uses of one operation by one client: counted per request, added to the counter's children at each scrape. */
export interface UseTally {
  /** The child of each coordinate the operation selects, for this client: resolved once. */
  readonly children: readonly Counter.Internal[];
  /** Operations counted since the last scrape. */
  pending: number;
}

/** The counter's name, as `npm run schema:check --usage` reads it (scripts/schema-check/usage.ts). */
export const SCHEMA_USAGE_METRIC = 'gateway_schema_coordinate_uses_total';

/** Tallies waiting for a scrape at most: past it they reach the counter at once (so unscraped, none are kept). */
const MAX_PENDING = 1_000;

/**
 * Schema usage. Every label comes from the schema (the coordinates a validated operation selects) or client
 * awareness's bounded labels, never as a client sent it. A request costs one increment of its tally; each child gets
 * the sum at each scrape (the counter's `collect`): per request nothing of prom-client runs (queued-observations.ts).
 */
export class SchemaUsageMetrics extends MetricGroup {
  readonly #uses = new Counter({
    name: SCHEMA_USAGE_METRIC,
    help: 'Operations that selected each schema coordinate (Type.field, Type.field(arg:), Input.field, Enum.VALUE, @directive), by the client app that sent them (bounded as gateway_client_operation_duration_seconds); what npm run schema:check --usage reads.',
    labelNames: ['coordinate', 'client_name', 'client_version'] as const,
    registers: [this.registry],
    collect: () => this.flush(),
  });
  #pending: UseTally[] = [];

  /** A tally of `coordinates` for one client's labels, its children made now: counting costs nothing of prom-client. */
  tally(coordinates: readonly string[], clientName: string, clientVersion: string): UseTally {
    return {
      children: coordinates.map((coordinate) =>
        this.#uses.labels({ coordinate, client_name: clientName, client_version: clientVersion }),
      ),
      pending: 0,
    };
  }

  count(tally: UseTally): void {
    if (tally.pending++ === 0 && this.#pending.push(tally) >= MAX_PENDING) this.flush();
  }

  /** Adds what the tallies counted to their children (each child once). */
  flush(): void {
    const pending = this.#pending;
    this.#pending = [];
    for (const tally of pending) {
      const uses = tally.pending;
      tally.pending = 0;
      for (const child of tally.children) child.inc(uses);
    }
  }
}
