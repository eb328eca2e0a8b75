import type { Server } from 'node:net';
import { Gauge, type Registry } from 'prom-client';
import { MetricGroup } from './metric-group.js';

/** The public port and ADMIN_PORT. */
export type ConnectionPort = 'public' | 'admin';

/** The client connections of a process's ports: open now (read at scrape time only), and dropped over a port's cap. */
export class ConnectionMetrics extends MetricGroup {
  readonly #dropped = this.counter(
    'gateway_connections_dropped_total',
    'Client connections closed on arrival because as many as the port allows were open (MAX_CONNECTIONS on the public port; the admin port has a small cap of its own).',
    ['port'],
  );
  readonly #servers = new Map<ConnectionPort, Server>();

  readonly #open: Gauge<'port'> = new Gauge({
    name: 'gateway_connections_open',
    help: 'Client connections open now, by port (public, admin).',
    labelNames: ['port'] as const,
    registers: [this.registry],
    collect: async () => {
      for (const [port, server] of this.#servers) {
        const open = await new Promise<number>((resolve) =>
          server.getConnections((error, count) => resolve(error ? 0 : count)),
        );
        this.#open.set({ port }, open);
      }
    },
  });

  watch(server: Server, port: ConnectionPort): () => void {
    this.#servers.set(port, server);
    const dropped = this.#dropped.labels({ port });
    dropped.inc(0); // the series exists from the start, so a rate over it has a beginning
    return () => dropped.inc();
  }
}

/** The load the shedder reads (server/traffic/load-shedder.ts), as the gauges show it at each scrape. */
export interface ProcessLoad {
  readonly inFlight: number;
  readonly delayMs: number;
  readonly upstreamQueued: number;
}

export class LoadMetrics extends MetricGroup {
  // Unwatched, the gauges read 0, as they do unset.
  #load: ProcessLoad = { inFlight: 0, delayMs: 0, upstreamQueued: 0 };

  constructor(registry: Registry) {
    super(registry);
    this.gauge(
      'gateway_operations_in_flight',
      'GraphQL operations admitted whose answer is not yet out (an @defer/@stream one until its last part), process-wide: what SHED_MAX_IN_FLIGHT caps.',
      () => this.#load.inFlight,
    );
    // Several workers (WORKERS>1): the most delayed one, not a sum.
    this.gauge(
      'gateway_shedding_event_loop_delay_seconds',
      "The event loop's delay, the median over the last 500 ms window: what SHED_EVENT_LOOP_DELAY_MS caps.",
      () => this.#load.delayMs / 1000,
      'max',
    );
    this.gauge(
      'gateway_upstream_calls_queued',
      'Upstream calls waiting for a connection of the pool, every one of UPSTREAM_CONNECTIONS busy: what SHED_MAX_UPSTREAM_QUEUED caps.',
      () => this.#load.upstreamQueued,
    );
  }

  watch(load: ProcessLoad): void {
    this.#load = load;
  }
}
