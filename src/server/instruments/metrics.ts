import type { Server } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type LabelValues } from 'prom-client';
import { scrapeWorkerGroup } from './cluster-metrics.js';
import { operationNames, type OperationName } from '../../domain/operations.js';
import type { CircuitStateName } from '../../upstream/circuit.js';
import type { CircuitName } from '../../upstream/circuits.js';
import type { UpstreamAttempt } from '../../upstream/transport.js';

/**
 * A histogram's observations kept in two arrays and handed to prom-client together: at every
 * scrape (the histogram's `collect`) and whenever `batch` are waiting. prom-client validates and
 * hashes the labels and finds the bucket on each observation; done per request, between the
 * request's other work, that costs several times what it costs in a loop.
 */
class QueuedObservations<T extends string> {
  #labels: LabelValues<T>[] = [];
  #values: number[] = [];

  constructor(
    private readonly histogram: Histogram<T>,
    private readonly batch = 256,
  ) {}

  observe(labels: LabelValues<T>, value: number): void {
    this.#labels.push(labels);
    if (this.#values.push(value) >= this.batch) this.flush();
  }

  flush(): void {
    const labels = this.#labels;
    const values = this.#values;
    this.#labels = [];
    this.#values = [];
    for (let i = 0; i < values.length; i++) {
      try {
        this.histogram.observe(labels[i]!, values[i]!);
      } catch {
        // One observation prom-client refuses (a value not finite) is dropped, not kept to fail every scrape.
      }
    }
  }
}

/** An operation's duration buckets (seconds), by name and by client alike, so the two compare. */
const operationBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15];

/** A gateway process's listening ports: the public one and ADMIN_PORT. */
export type ConnectionPort = 'public' | 'admin';

/** What a bounded cache holds: its entries and their estimated heap bytes. */
export interface CacheUse {
  readonly entries: number;
  readonly bytes: number;
}

/**
 * The gateway's Prometheus metrics, in a registry of its own (not prom-client's global one) so
 * tests and several gateways in one process never share counters.
 */
export class GatewayMetrics {
  readonly registry = new Registry();

  readonly #operations: Histogram<'operation' | 'type' | 'outcome'> = new Histogram({
    name: 'gateway_operation_duration_seconds',
    help: 'GraphQL operations by name, type and outcome (ok, error, refused), with their duration.',
    labelNames: ['operation', 'type', 'outcome'] as const,
    buckets: operationBuckets,
    registers: [this.registry],
    collect: () => this.operations.flush(),
  });
  readonly operations = new QueuedObservations(this.#operations);

  readonly #clientOperations: Histogram<'client_name' | 'client_version' | 'outcome'> = new Histogram({
    name: 'gateway_client_operation_duration_seconds',
    help: 'GraphQL operations by the client app that sent them (apollographql-client-name/-version or graphql-client-name/-version; bounded, see METRICS_CLIENT_NAMES) and outcome, with their duration.',
    labelNames: ['client_name', 'client_version', 'outcome'] as const,
    buckets: operationBuckets,
    registers: [this.registry],
    collect: () => this.clientOperations.flush(),
  });
  readonly clientOperations = new QueuedObservations(this.#clientOperations);

  readonly #upstreamCalls: Histogram<'operation' | 'status'> = new Histogram({
    name: 'gateway_upstream_call_duration_seconds',
    help: 'Upstream call attempts by operation and status (or error code), with their duration.',
    labelNames: ['operation', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [this.registry],
    collect: () => this.upstreamCalls.flush(),
  });
  readonly upstreamCalls = new QueuedObservations(this.#upstreamCalls);

  readonly upstreamRetries = new Counter({
    name: 'gateway_upstream_retries_total',
    help: 'Upstream call attempts that were retries of an idempotent read.',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly #circuitChanges = new Counter({
    name: 'gateway_upstream_circuit_state_changes_total',
    help: "Changes of an upstream operation's circuit breaker, by operation and the state entered (open, half_open, closed).",
    labelNames: ['operation', 'state'] as const,
    registers: [this.registry],
  });

  readonly #circuitState = new Gauge({
    name: 'gateway_upstream_circuit_state',
    help: "Each upstream operation's circuit breaker now, by operation: 0 closed, 1 open (its calls fail at once, nothing sent), 2 half-open (one probe call in flight).",
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly #hostCircuitChanges = new Counter({
    name: 'gateway_upstream_host_circuit_state_changes_total',
    help: "Changes of the upstream host's circuit breaker (failed connections; it refuses every operation's calls), by the state entered.",
    labelNames: ['state'] as const,
    registers: [this.registry],
  });

  readonly #hostCircuitState = new Gauge({
    name: 'gateway_upstream_host_circuit_state',
    help: "The upstream host's circuit breaker now: 0 closed, 1 open (every call fails at once, nothing sent), 2 half-open (one probe call in flight).",
    registers: [this.registry],
  });

  readonly #circuitRefusals = new Counter({
    name: 'gateway_upstream_circuit_refusals_total',
    help: "Upstream calls not sent because their operation's or the host's circuit breaker was open, by operation.",
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  /** Feeds a breaker's state changes. */
  recordCircuitState = (circuit: CircuitName, state: CircuitStateName): void => {
    const value = state === 'closed' ? 0 : state === 'open' ? 1 : 2;
    if (circuit === 'host') {
      this.#hostCircuitChanges.inc({ state });
      this.#hostCircuitState.set(value);
    } else {
      this.#circuitChanges.inc({ operation: circuit, state });
      this.#circuitState.set({ operation: circuit }, value);
    }
  };

  /** Counts a call an open breaker refused. */
  recordCircuitRefusal = (operation: OperationName): void => this.#circuitRefusals.inc({ operation });

  readonly upstreamCallsJoined = new Counter({
    name: 'gateway_upstream_calls_joined_total',
    help: 'Upstream GETs not sent because the same caller had the same one in flight: the request shared its answer (UPSTREAM_DEDUPE).',
    registers: [this.registry],
  });

  readonly upstreamRetriesRefused = new Counter({
    name: 'gateway_upstream_retries_refused_total',
    help: 'Retries of upstream GETs not made because the retry budget (UPSTREAM_RETRY_BUDGET_*) was spent.',
    registers: [this.registry],
  });

  readonly refusals = new Counter({
    name: 'gateway_refusals_total',
    help: 'Requests refused before execution, by the limit that refused them.',
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  readonly overloadRefusals = new Counter({
    name: 'gateway_overload_refusals_total',
    help: 'Operations refused with OVERLOADED (each one of gateway_refusals_total{limit="overloaded"} too), by reason: caller_share (the gateway overloaded, and its caller or address held its fair share or more), cap (in flight at twice SHED_MAX_IN_FLIGHT: whoever sent it), event_loop or upstream_queue (overloaded with nothing in flight to share out).',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  readonly abandonedAnswers = new Counter({
    name: 'gateway_abandoned_answers_total',
    help: 'Answers not serialised because the client had closed the request.',
    registers: [this.registry],
  });

  readonly sharedStateFallbacks = new Counter({
    name: 'gateway_shared_state_fallbacks_total',
    help: 'Redis (REDIS_URL) commands of the rate limits, the APQ store or the response cache (store="response_cache": a miss, or nothing stored or evicted) served from process memory instead, by store and reason (unreachable, out_of_memory, read_only, error).',
    labelNames: ['store', 'reason'] as const,
    registers: [this.registry],
  });

  readonly #connectionsDropped = new Counter({
    name: 'gateway_connections_dropped_total',
    help: 'Client connections closed on arrival because as many as the port allows were open (MAX_CONNECTIONS on the public port; the admin port has a small cap of its own).',
    labelNames: ['port'] as const,
    registers: [this.registry],
  });

  /** The servers whose open connections the gauge reports, by port; read at scrape time only. */
  readonly #servers = new Map<ConnectionPort, Server>();

  readonly #connectionsOpen: Gauge<'port'> = new Gauge({
    name: 'gateway_connections_open',
    help: 'Client connections open now, by port (public, admin).',
    labelNames: ['port'] as const,
    registers: [this.registry],
    collect: async () => {
      for (const [port, server] of this.#servers) {
        const open = await new Promise<number>((resolve) => server.getConnections((error, count) => resolve(error ? 0 : count)));
        this.#connectionsOpen.set({ port }, open);
      }
    },
  });

  /** Reports `server`'s open connections as `port` (read at scrape time only), and returns the count of those it drops over its cap. */
  watchConnections(server: Server, port: ConnectionPort): () => void {
    this.#servers.set(port, server);
    const dropped = this.#connectionsDropped.labels({ port });
    // The series exists from the start (at 0), so a rate over it has a beginning.
    dropped.inc(0);
    return () => dropped.inc();
  }

  /** Readers of the caches kept per distinct document, by cache (`parsed`, `compiled`), read at each scrape. */
  readonly #documentCaches = new Map<string, () => CacheUse>();

  readonly documentCacheEntries = this.#documentCacheGauge('gateway_document_cache_entries', 'Entries of the caches kept per distinct document: parsed (yoga parse cache), compiled (COMPILED_EXECUTION).', (use) => use.entries);
  readonly documentCacheBytes = this.#documentCacheGauge('gateway_document_cache_bytes', 'Estimated heap bytes of the caches kept per distinct document, by cache.', (use) => use.bytes);

  readonly compiledExecutions = new Counter({
    name: 'gateway_compiled_executions_total',
    help: 'Operations run by their compiled code (COMPILED_EXECUTION) rather than the interpreter.',
    registers: [this.registry],
  });

  #counter(name: string, help: string): Counter {
    return new Counter({ name, help, registers: [this.registry] });
  }

  readonly cachedAnswersEarly = this.#counter(
    'gateway_response_cache_early_answers_total',
    'Hits answered before yoga, by the lane (server/lane.ts); each is a hit of gateway_response_cache_lookups_total too.',
  );

  readonly compiledAnswersEarly = this.#counter(
    'gateway_compiled_early_answers_total',
    'Hot queries answered before yoga, by the lane (server/lane.ts) with their compiled code; each is one of gateway_compiled_executions_total too.',
  );

  readonly #responseCacheLookups = new Counter({
    name: 'gateway_response_cache_lookups_total',
    help: 'Lookups of the response cache (RESPONSE_CACHE_TTL_MS), by result: hit (answered without executing) or miss; an If-None-Match revalidation is one too.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly #responseCacheInvalidations = this.#counter('gateway_response_cache_invalidations_total', 'Invalidations of the response cache: one per mutation that changes something cached (and one per set of objects a mutation returns).');

  readonly #responseCacheInvalidatedEntities = this.#counter('gateway_response_cache_invalidated_entities_total', 'Entities (Type:id) and whole types those invalidations named.');

  readonly #responseCacheEvictions = this.#counter('gateway_response_cache_evictions_total', 'Cached answers those invalidations evicted (as the store counts them).');

  readonly #responseCacheStale = this.#counter(
    'gateway_response_cache_stale_answers_total',
    'Answers kept past their TTL served for reads that failed upstream (an upstream fault or an open breaker; RESPONSE_CACHE_STALE_IF_ERROR_MS), marked stale.',
  );

  readonly #responseCacheOverBudget = new Counter({
    name: 'gateway_response_cache_over_budget_total',
    help: "Answers that met a byte bound of the response cache as they were stored, by bound: `total` (RESPONSE_CACHE_MAX_BYTES in Redis: not stored) or `caller` (the caller's share: in Redis not stored, in process memory the caller's own oldest answers dropped to make room).",
    labelNames: ['bound'] as const,
    registers: [this.registry],
  });

  /** An answer met a byte bound of the response cache (response-cache/redis-store.ts, memory-store.ts). */
  readonly responseCacheOverBudget = (bound: 'total' | 'caller'): void => void this.#responseCacheOverBudget.inc({ bound });

  readonly #responseCacheFailures = new Counter({
    name: 'gateway_response_cache_failures_total',
    help: 'Calls to the response cache store that failed (Redis unreachable or refusing, or evictions owed), by call: a lookup answered as a miss, a write not kept, an invalidation not made yet (made again once Redis answers; until then the store answers nothing); fail open.',
    labelNames: ['call'] as const,
    registers: [this.registry],
  });

  /** What the response cache's store holds, read at each scrape; none for a store that cannot say cheaply. */
  #responseCacheUse: (() => CacheUse) | undefined;

  readonly #responseCacheGauges = [
    this.#responseCacheGauge('gateway_response_cache_entries', "Answers the response cache keeps in this process's memory (without REDIS_URL).", (use) => use.entries),
    this.#responseCacheGauge('gateway_response_cache_bytes', "Heap the answers the response cache keeps in this process's memory hold, estimated (without REDIS_URL): what RESPONSE_CACHE_MAX_BYTES bounds.", (use) => use.bytes),
  ];

  /** A gauge read from the response cache's store at each scrape: registered by `watchResponseCache` for a store that can say (a 0 would be a lie for Redis). */
  #responseCacheGauge(name: string, help: string, pick: (use: CacheUse) => number): Gauge {
    const gauge: Gauge = new Gauge({
      name,
      help,
      registers: [],
      collect: () => {
        if (this.#responseCacheUse !== undefined) gauge.set(pick(this.#responseCacheUse()));
      },
    });
    return gauge;
  }

  /** The response cache's events, counted; `use` (the store in memory's) is read at each scrape for the entries and bytes gauges. */
  watchResponseCache(use: (() => CacheUse) | undefined) {
    if (use !== undefined && this.#responseCacheUse === undefined) for (const gauge of this.#responseCacheGauges) this.registry.registerMetric(gauge);
    this.#responseCacheUse = use ?? this.#responseCacheUse;
    const hits = this.#responseCacheLookups.labels({ result: 'hit' });
    const misses = this.#responseCacheLookups.labels({ result: 'miss' });
    return {
      hit: () => hits.inc(),
      miss: () => misses.inc(),
      invalidated: (entities: number, evicted: number | undefined) => {
        this.#responseCacheInvalidations.inc();
        this.#responseCacheInvalidatedEntities.inc(entities);
        if (evicted !== undefined) this.#responseCacheEvictions.inc(evicted);
      },
      stale: () => this.#responseCacheStale.inc(),
      failed: (call: 'lookup' | 'write' | 'invalidate') => this.#responseCacheFailures.inc({ call }),
    };
  }

  /** Reports a per-document cache in gateway_document_cache_entries and _bytes. */
  watchDocumentCache(cache: string, use: () => CacheUse): void {
    this.#documentCaches.set(cache, use);
  }

  /** A gauge by cache, read from the watched caches at each scrape. */
  #documentCacheGauge(name: string, help: string, pick: (use: CacheUse) => number): Gauge<'cache'> {
    const gauge: Gauge<'cache'> = new Gauge({
      name,
      help,
      labelNames: ['cache'] as const,
      registers: [this.registry],
      collect: () => {
        for (const [cache, use] of this.#documentCaches) gauge.set({ cache }, pick(use()));
      },
    });
    return gauge;
  }

  /** What the load gauges read at each scrape (server/traffic/load-shedder.ts). */
  #load: { readonly inFlight: number; readonly delayMs: number; readonly upstreamQueued: number } | undefined;

  readonly #operationsOpen: Gauge = new Gauge({
    name: 'gateway_operations_in_flight',
    help: 'GraphQL operations admitted whose answer is not yet out (an @defer/@stream one until its last part), process-wide: what SHED_MAX_IN_FLIGHT caps.',
    registers: [this.registry],
    collect: () => {
      if (this.#load !== undefined) this.#operationsOpen.set(this.#load.inFlight);
    },
  });

  readonly #eventLoopDelay: Gauge = new Gauge({
    name: 'gateway_shedding_event_loop_delay_seconds',
    help: "The event loop's delay, the median over the last 500 ms window: what SHED_EVENT_LOOP_DELAY_MS caps.",
    registers: [this.registry],
    // Several workers (WORKERS>1): the most delayed one, not a sum.
    aggregator: 'max',
    collect: () => {
      if (this.#load !== undefined) this.#eventLoopDelay.set(this.#load.delayMs / 1000);
    },
  });

  readonly #upstreamQueued: Gauge = new Gauge({
    name: 'gateway_upstream_calls_queued',
    help: "Upstream calls waiting for a connection of the pool, every one of UPSTREAM_CONNECTIONS busy: what SHED_MAX_UPSTREAM_QUEUED caps.",
    registers: [this.registry],
    collect: () => {
      if (this.#load !== undefined) this.#upstreamQueued.set(this.#load.upstreamQueued);
    },
  });

  /** Reports the shedder's operations in flight, event-loop delay and upstream queue, read at each scrape. */
  watchLoad(load: { readonly inFlight: number; readonly delayMs: number; readonly upstreamQueued: number }): void {
    this.#load = load;
  }

  /** The Prometheus text /metrics answers: this process's registry, or in a cluster worker the sum over all workers. */
  readonly scrape: () => Promise<string>;

  /**
   * @param options.clusterWorker this process is one of several workers behind one port
   *   (`WORKERS>1`): a scrape asks the cluster primary for the sum over all workers.
   */
  constructor(options: { defaultMetrics?: boolean; clusterWorker?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    // Every breaker's series exists from the start (closed, nothing refused): the operations are a fixed set.
    this.#hostCircuitState.set(0);
    for (const operation of operationNames) {
      this.#circuitState.set({ operation }, 0);
      this.#circuitRefusals.inc({ operation }, 0);
    }
    this.scrape = options.clusterWorker === true ? scrapeWorkerGroup(this.registry) : () => this.registry.metrics();
  }

  /** Feeds the transport's per-attempt hook. */
  recordAttempt = (attempt: UpstreamAttempt): void => {
    this.upstreamCalls.observe({ operation: attempt.operation, status: attempt.status ?? attempt.code ?? 'error' }, attempt.durationMs / 1000);
    if (attempt.retry) this.upstreamRetries.inc({ operation: attempt.operation });
  };
}
