import { Gauge } from 'prom-client';
import { MetricGroup } from './metric-group.js';

/** What a bounded cache holds: its entries and their estimated heap bytes. */
export interface CacheUse {
  readonly entries: number;
  readonly bytes: number;
}

/** The caches kept per distinct document (`parsed`, `compiled`): entries and bytes by cache, read at each scrape. */
export class DocumentCacheMetrics extends MetricGroup {
  readonly #caches = new Map<string, (() => CacheUse)[]>();

  readonly entries = this.#gauge(
    'gateway_document_cache_entries',
    'Entries of the caches kept per distinct document: parsed (the prepared documents: parsed and validated), compiled (COMPILED_EXECUTION).',
    (use) => use.entries,
  );
  readonly bytes = this.#gauge(
    'gateway_document_cache_bytes',
    'Estimated heap bytes of the caches kept per distinct document, by cache.',
    (use) => use.bytes,
  );

  /** Adds a cache of kind `cache` (one per schema served: `/graphql`'s and SUBGRAPH_PATH's): shown summed by kind. */
  watch(cache: string, use: () => CacheUse): void {
    this.#caches.set(cache, [...(this.#caches.get(cache) ?? []), use]);
  }

  #gauge(name: string, help: string, pick: (use: CacheUse) => number): Gauge<'cache'> {
    const gauge: Gauge<'cache'> = new Gauge({
      name,
      help,
      labelNames: ['cache'] as const,
      registers: [this.registry],
      collect: () => {
        for (const [cache, uses] of this.#caches)
          gauge.labels({ cache }).set(uses.reduce((sum, use) => sum + pick(use()), 0));
      },
    });
    return gauge;
  }
}

/** The response cache's lookups, invalidations, stale answers, byte bounds met and failures, and its store's use. */
export class ResponseCacheMetrics extends MetricGroup {
  readonly #lookups = this.counter(
    'gateway_response_cache_lookups_total',
    'Lookups of the response cache (RESPONSE_CACHE_TTL_MS), by result: hit (answered without executing) or miss; an If-None-Match revalidation is one too.',
    ['result'],
  );
  readonly #invalidations = this.counter(
    'gateway_response_cache_invalidations_total',
    'Invalidations of the response cache: one per mutation that changes something cached (and one per set of objects a mutation returns).',
  );
  readonly #invalidatedEntities = this.counter(
    'gateway_response_cache_invalidated_entities_total',
    'Entities (Type:id) and whole types those invalidations named.',
  );
  readonly #evictions = this.counter(
    'gateway_response_cache_evictions_total',
    'Cached answers those invalidations evicted (as the store counts them).',
  );
  readonly #stale = this.counter(
    'gateway_response_cache_stale_answers_total',
    'Answers kept past their TTL served for reads that failed upstream (an upstream fault or an open breaker; RESPONSE_CACHE_STALE_IF_ERROR_MS), marked stale.',
  );
  readonly #overBudget = this.counter(
    'gateway_response_cache_over_budget_total',
    "Answers that met a byte bound of the response cache as they were stored, by bound: `total` (RESPONSE_CACHE_MAX_BYTES in Redis: not stored) or `caller` (the caller's share: in Redis not stored, in process memory the caller's own oldest answers dropped to make room).",
    ['bound'],
  );
  readonly overBudget = (bound: 'total' | 'caller'): void => void this.#overBudget.inc({ bound });
  readonly #failures = this.counter(
    'gateway_response_cache_failures_total',
    'Calls to the response cache store that failed (Redis unreachable or refusing, or evictions owed), by call: a lookup answered as a miss, a write not kept, an invalidation not made yet (made again once Redis answers; until then the store answers nothing); fail open.',
    ['call'],
  );
  /** The store's use, read at each scrape; none for a store that cannot say cheaply (Redis's 0 would be a lie). */
  #use: (() => CacheUse) | undefined;

  watch(use: (() => CacheUse) | undefined) {
    if (use !== undefined && this.#use === undefined) {
      this.gauge(
        'gateway_response_cache_entries',
        "Answers the response cache keeps in this process's memory (without REDIS_URL).",
        () => this.#use!().entries,
      );
      this.gauge(
        'gateway_response_cache_bytes',
        "Heap the answers the response cache keeps in this process's memory hold, estimated (without REDIS_URL): what RESPONSE_CACHE_MAX_BYTES bounds.",
        () => this.#use!().bytes,
      );
    }
    this.#use = use ?? this.#use;
    const hits = this.#lookups.labels({ result: 'hit' });
    const misses = this.#lookups.labels({ result: 'miss' });
    return {
      hit: () => hits.inc(),
      miss: () => misses.inc(),
      invalidated: (entities: number, evicted: number | undefined) => {
        this.#invalidations.inc();
        this.#invalidatedEntities.inc(entities);
        if (evicted !== undefined) this.#evictions.inc(evicted);
      },
      stale: () => this.#stale.inc(),
      failed: (call: 'lookup' | 'write' | 'invalidate') => this.#failures.inc({ call }),
    };
  }
}
