import type { Server } from 'node:net';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { type CacheUse, DocumentCacheMetrics, ResponseCacheMetrics } from './cache-metrics.js';
import { scrapeWorkerGroup } from './cluster-metrics.js';
import { ConnectionMetrics, type ConnectionPort, LoadMetrics, type ProcessLoad } from './load-metrics.js';
import { MetricGroup } from './metric-group.js';
import { QueuedObservations } from './queued-observations.js';
import { RealTimeMetrics } from './real-time-metrics.js';
import { UpstreamMetrics } from './upstream-metrics.js';
import { SchemaUsageMetrics } from './usage-metrics.js';

export type { CacheUse };

/** An operation's duration buckets (seconds), by name and by client alike, so the two compare. */
const operationBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15];

/** The gateway's metrics, in a registry of its own (not prom-client's global one): gateways never share counters. */
export class GatewayMetrics extends MetricGroup {
  readonly operations = QueuedObservations.histogram({
    name: 'gateway_operation_duration_seconds',
    help: 'GraphQL operations by name, type and outcome (ok, error, refused), with their duration.',
    labelNames: ['operation', 'type', 'outcome'] as const,
    buckets: operationBuckets,
    registers: [this.registry],
  });
  readonly operationFaults = this.counter(
    'gateway_operation_faults_total',
    "GraphQL operations (those of gateway_operation_duration_seconds) answered with an error that is not their client's doing, by type and fault: upstream (UPSTREAM_TIMEOUT, UPSTREAM_UNAVAILABLE, UPSTREAM_ERROR, UPSTREAM_OUTCOME_UNKNOWN) or gateway (INTERNAL_SERVER_ERROR, OVERLOADED). What the availability SLO counts as bad (deploy/prometheus/).",
    ['type', 'fault'],
  );
  readonly clientOperations = QueuedObservations.histogram({
    name: 'gateway_client_operation_duration_seconds',
    help: 'GraphQL operations by the client app that sent them (apollographql-client-name/-version or graphql-client-name/-version; bounded, see METRICS_CLIENT_NAMES) and outcome, with their duration.',
    labelNames: ['client_name', 'client_version', 'outcome'] as const,
    buckets: operationBuckets,
    registers: [this.registry],
  });
  readonly schemaUsage = new SchemaUsageMetrics(this.registry);
  readonly #upstream = new UpstreamMetrics(this.registry);
  readonly recordAttempt = this.#upstream.recordAttempt;
  readonly recordCircuitState = this.#upstream.recordCircuitState;
  readonly recordCircuitRefusal = this.#upstream.recordCircuitRefusal;
  readonly upstreamCallsJoined = this.#upstream.callsJoined;
  readonly upstreamRetriesRefused = this.#upstream.retriesRefused;
  readonly refusals = this.counter(
    'gateway_refusals_total',
    'Requests refused before execution, by the limit that refused them.',
    ['limit'],
  );
  readonly overloadRefusals = this.counter(
    'gateway_overload_refusals_total',
    'Operations refused with OVERLOADED (each one of gateway_refusals_total{limit="overloaded"} too), by reason: caller_share (the gateway overloaded, and its caller or address held its fair share or more), cap (in flight at twice SHED_MAX_IN_FLIGHT: whoever sent it), event_loop or upstream_queue (overloaded with nothing in flight to share out).',
    ['reason'],
  );
  readonly abandonedAnswers = this.counter(
    'gateway_abandoned_answers_total',
    'Answers not serialised because the client had closed the request.',
  );
  readonly sharedStateFallbacks = this.counter(
    'gateway_shared_state_fallbacks_total',
    'Redis (REDIS_URL) commands of the rate limits, the APQ store, the response cache (store="response_cache": a miss, or nothing stored or evicted) or head events (store="events": an event told to this process only) served from process memory instead, by store and reason (unreachable, out_of_memory, read_only, error).',
    ['store', 'reason'],
  );
  readonly #connections = new ConnectionMetrics(this.registry);
  readonly #documentCaches = new DocumentCacheMetrics(this.registry);
  readonly compiledExecutions = this.counter(
    'gateway_compiled_executions_total',
    'Operations run by their compiled code (COMPILED_EXECUTION) rather than the interpreter.',
  );
  readonly #responseCache = new ResponseCacheMetrics(this.registry);
  /** An answer met a byte bound of the response cache (response-cache/redis-store.ts, memory-store.ts). */
  readonly responseCacheOverBudget = this.#responseCache.overBudget;
  readonly #load = new LoadMetrics(this.registry);
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

  /** What the gauges the constructor makes read at each scrape, until told. */
  #knownTokens: () => number = () => 0;
  #ready: () => boolean = () => true;
  #upstreamAnswered: () => boolean | undefined = () => undefined;

  /** Reports in gateway_known_tokens the tokens known to be real (traffic/known-tokens.ts). */
  watchKnownTokens(count: () => number): void {
    this.#knownTokens = count;
  }

  /** Reports in gateway_ready what /ready answers (probes/answers.ts), asking the upstream nothing of its own. */
  watchReadiness(ready: () => boolean): void {
    this.#ready = ready;
  }

  /** Reports in gateway_upstream_answering whether the upstream answered /ready's last probe (undefined: not yet). */
  watchUpstreamAnswers(answered: () => boolean | undefined): void {
    this.#upstreamAnswered = answered;
  }

  /** Reports the shedder's operations in flight, event-loop delay and upstream queue, read at each scrape. */
  watchLoad(load: ProcessLoad): void {
    this.#load.watch(load);
  }

  /** The Prometheus text /metrics answers: this process's registry, or in a cluster worker the sum over all workers. */
  readonly scrape: () => Promise<string>;

  /** @param options.clusterWorker one of several workers behind one port (`WORKERS>1`): a scrape asks the primary. */
  constructor(options: { defaultMetrics?: boolean; clusterWorker?: boolean } = {}) {
    super(new Registry());
    this.gauge(
      'gateway_known_tokens',
      "Tokens this process knows to be real (KNOWN_TOKENS_MAX at most): learnt from the upstream, the gateway's login, or (REDIS_URL) another replica. Each such caller is judged by its own limits.",
      () => this.#knownTokens(),
    );
    // With WORKERS>1 the group is ready only if every worker is.
    this.gauge(
      'gateway_ready',
      '1 while /ready answers 200, else 0 (the upstream not answering when last probed, every breaker refusing, or shutting down).',
      () => (this.#ready() ? 1 : 0),
      'min',
    );
    this.gauge(
      'gateway_upstream_answering',
      "0 once the upstream did not answer /ready's last probe (a refused or dropped connection, no answer within 800 ms), else 1: seen with no traffic, unlike the breakers.",
      () => (this.#upstreamAnswered() === false ? 0 : 1),
      'min',
    );
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    this.scrape = options.clusterWorker === true ? scrapeWorkerGroup(this.registry) : () => this.registry.metrics();
  }
}
