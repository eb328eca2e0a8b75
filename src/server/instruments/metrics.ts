import type { Server } from 'node:net';
import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import { type CacheUse, DocumentCacheMetrics, ResponseCacheMetrics } from './cache-metrics.js';
import { scrapeWorkerGroup } from './cluster-metrics.js';
import { ConnectionMetrics, type ConnectionPort, LoadMetrics, type ProcessLoad } from './load-metrics.js';
import { QueuedObservations } from './queued-observations.js';
import { RealTimeMetrics } from './real-time-metrics.js';
import { UpstreamMetrics } from './upstream-metrics.js';
import { SchemaUsageMetrics } from './usage-metrics.js';

// What a bounded cache holds (cache-metrics.ts), as documents/prepared.ts and compiled-execution.ts import it.
export type { CacheUse };

/** An operation's duration buckets (seconds), by name and by client alike, so the two compare. */
const operationBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15];

/**
 * The gateway's Prometheus metrics, in a registry of its own (not prom-client's global one) so tests and several
 * gateways in one process never share counters; the groups (upstream-metrics.ts, cache-metrics.ts, load-metrics.ts)
 * are made in /metrics order.
 */
export class GatewayMetrics {
  readonly registry = new Registry();

  readonly operations = QueuedObservations.histogram({
    name: 'gateway_operation_duration_seconds',
    help: 'GraphQL operations by name, type and outcome (ok, error, refused), with their duration.',
    labelNames: ['operation', 'type', 'outcome'] as const,
    buckets: operationBuckets,
    registers: [this.registry],
  });
  readonly operationFaults = new Counter({
    name: 'gateway_operation_faults_total',
    help: "GraphQL operations (those of gateway_operation_duration_seconds) answered with an error that is not their client's doing, by type and fault: upstream (UPSTREAM_TIMEOUT, UPSTREAM_UNAVAILABLE, UPSTREAM_ERROR, UPSTREAM_OUTCOME_UNKNOWN) or gateway (INTERNAL_SERVER_ERROR, OVERLOADED). What the availability SLO counts as bad (deploy/prometheus/).",
    labelNames: ['type', 'fault'] as const,
    registers: [this.registry],
  });
  readonly clientOperations = QueuedObservations.histogram({
    name: 'gateway_client_operation_duration_seconds',
    help: 'GraphQL operations by the client app that sent them (apollographql-client-name/-version or graphql-client-name/-version; bounded, see METRICS_CLIENT_NAMES) and outcome, with their duration.',
    labelNames: ['client_name', 'client_version', 'outcome'] as const,
    buckets: operationBuckets,
    registers: [this.registry],
  });
  /** The schema coordinates operations select, by client (documents/coordinate-usage.ts). */
  readonly schemaUsage = new SchemaUsageMetrics(this.registry);
  readonly #upstream = new UpstreamMetrics(this.registry);
  readonly recordAttempt = this.#upstream.recordAttempt;
  readonly recordCircuitState = this.#upstream.recordCircuitState;
  readonly recordCircuitRefusal = this.#upstream.recordCircuitRefusal;
  readonly upstreamCallsJoined = this.#upstream.callsJoined;
  readonly upstreamRetriesRefused = this.#upstream.retriesRefused;
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
    help: 'Redis (REDIS_URL) commands of the rate limits, the APQ store, the response cache (store="response_cache": a miss, or nothing stored or evicted) or head events (store="events": an event told to this process only) served from process memory instead, by store and reason (unreachable, out_of_memory, read_only, error).',
    labelNames: ['store', 'reason'] as const,
    registers: [this.registry],
  });
  readonly #connections = new ConnectionMetrics(this.registry);
  readonly #documentCaches = new DocumentCacheMetrics(this.registry);
  readonly compiledExecutions = new Counter({
    name: 'gateway_compiled_executions_total',
    help: 'Operations run by their compiled code (COMPILED_EXECUTION) rather than the interpreter.',
    registers: [this.registry],
  });
  readonly #responseCache = new ResponseCacheMetrics(this.registry);
  /** An answer met a byte bound of the response cache (response-cache/redis-store.ts, memory-store.ts). */
  readonly responseCacheOverBudget = this.#responseCache.overBudget;
  readonly #load = new LoadMetrics(this.registry);
  /** Subscriptions, head changes, poll reads (server/real-time/). */
  readonly realTime = new RealTimeMetrics(this.registry);

  /** Reports `server`'s open connections as `port`, and returns the count of those it drops over its cap. */
  watchConnections(server: Server, port: ConnectionPort): () => void {
    return this.#connections.watch(server, port);
  }

  /** Reports a per-document cache in gateway_document_cache_entries and _bytes. */
  watchDocumentCache(cache: string, use: () => CacheUse): void {
    this.#documentCaches.watch(cache, use);
  }

  /** The response cache's events, counted; `use` (the memory store's) is read at each scrape for the gauges. */
  watchResponseCache(use: (() => CacheUse) | undefined) {
    return this.#responseCache.watch(use);
  }

  /** Read at each scrape (traffic/known-tokens.ts). */
  #knownTokens: () => number = () => 0;
  readonly #knownTokensGauge: Gauge = new Gauge({
    name: 'gateway_known_tokens',
    help: "Tokens this process knows to be real (KNOWN_TOKENS_MAX at most): learnt from the upstream, the gateway's login, or (REDIS_URL) another replica. Each such caller is judged by its own limits.",
    registers: [this.registry],
    collect: () => this.#knownTokensGauge.set(this.#knownTokens()),
  });

  /** Read at each scrape: what /ready last answered (probes/answers.ts), asking the upstream nothing of its own. */
  #ready: () => boolean = () => true;
  readonly #readyGauge: Gauge = new Gauge({
    name: 'gateway_ready',
    help: '1 while /ready answers 200, else 0 (the upstream not answering when last probed, every breaker refusing, or shutting down).',
    registers: [this.registry],
    // With WORKERS>1 the group is ready only if every worker is.
    aggregator: 'min',
    collect: () => this.#readyGauge.set(this.#ready() ? 1 : 0),
  });

  /** Reports in gateway_ready what /ready answers, at each scrape. */
  watchReadiness(ready: () => boolean): void {
    this.#ready = ready;
  }

  /** Read at each scrape: whether the upstream answered /ready's last probe (undefined: not probed yet). */
  #upstreamAnswered: () => boolean | undefined = () => undefined;
  readonly #upstreamAnsweringGauge: Gauge = new Gauge({
    name: 'gateway_upstream_answering',
    help: "0 once the upstream did not answer /ready's last probe (a refused or dropped connection, no answer within 800 ms), else 1: seen with no traffic, unlike the breakers.",
    registers: [this.registry],
    aggregator: 'min',
    collect: () => this.#upstreamAnsweringGauge.set(this.#upstreamAnswered() === false ? 0 : 1),
  });

  /** Reports in gateway_upstream_answering what /ready's last probe of the upstream found. */
  watchUpstreamAnswers(answered: () => boolean | undefined): void {
    this.#upstreamAnswered = answered;
  }

  /** Reports the tokens known to be real in gateway_known_tokens. */
  watchKnownTokens(count: () => number): void {
    this.#knownTokens = count;
  }

  /** Reports the shedder's operations in flight, event-loop delay and upstream queue, read at each scrape. */
  watchLoad(load: ProcessLoad): void {
    this.#load.watch(load);
  }

  /** The Prometheus text /metrics answers: this process's registry, or in a cluster worker the sum over all workers. */
  readonly scrape: () => Promise<string>;

  /** @param options.clusterWorker one of several workers behind one port (`WORKERS>1`): a scrape asks the primary. */
  constructor(options: { defaultMetrics?: boolean; clusterWorker?: boolean } = {}) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.scrape = options.clusterWorker === true ? scrapeWorkerGroup(this.registry) : () => this.registry.metrics();
  }
}
