import type { Registry } from 'prom-client';

/**
 * What the status page reads of the registry, each a `sum by (labels)` of one series of /metrics: [metric, series
 * suffix, labels kept]. Histograms are read as a scrape reads them: their `collect` flushes queued observations first.
 */
const SUMS: readonly (readonly [string, string, readonly string[]])[] = [
  ['gateway_operation_duration_seconds', '_count', ['outcome']],
  ['gateway_operation_duration_seconds', '_bucket', ['outcome', 'le']],
  ['gateway_operations_in_flight', '', []],
  ['gateway_refusals_total', '', ['limit']],
  ['gateway_overload_refusals_total', '', ['reason']],
  ['gateway_upstream_call_duration_seconds', '_count', ['operation', 'status']],
  ['gateway_upstream_circuit_state', '', ['operation']],
  ['gateway_upstream_circuit_refusals_total', '', ['operation']],
  ['gateway_upstream_host_circuit_state', '', []],
  ['gateway_response_cache_lookups_total', '', ['result']],
  ['gateway_response_cache_entries', '', []],
  ['gateway_response_cache_bytes', '', []],
  ['gateway_subscriptions_open', '', []],
  ['gateway_subscription_events_total', '', []],
  ['gateway_shared_state_fallbacks_total', '', ['store']],
  ['gateway_shedding_event_loop_delay_seconds', '', []],
  ['process_resident_memory_bytes', '', []],
  // prom-client sets the heap's gauges in the collect of the first of them, the total: read before the one used.
  ['nodejs_heap_size_total_bytes', '', []],
  ['nodejs_heap_size_used_bytes', '', []],
];

/** One summed series: its name as /metrics prints it, the labels kept, and the sum. */
export interface Series {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  value: number;
}

/** The sums at one moment, by key: `name{label="value",…}`, the labels in SUMS's order. */
export type Reading = ReadonlyMap<string, Series>;

const keyOf = (name: string, labels: Readonly<Record<string, string>>) => {
  const pairs = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  return pairs.length === 0 ? name : `${name}{${pairs.join(',')}}`;
};

/** The series SUMS names, summed by the labels it keeps: the numbers a scrape would print, added up. */
export async function readRegistry(registry: Registry): Promise<Reading> {
  const reading = new Map<string, Series>();
  for (const [metric, suffix, kept] of SUMS) {
    const found = registry.getSingleMetric(metric);
    if (found === undefined) continue;
    const name = metric + suffix;
    // A histogram's values name their series (`_bucket`, `_count`); a counter's or a gauge's are the metric's own.
    const { values } = (await found.get()) as { values: { value: number; labels: object; metricName?: string }[] };
    for (const { value, labels, metricName } of values) {
      if ((metricName ?? metric) !== name) continue;
      const sumBy = Object.fromEntries(
        kept.map((label) => [label, String((labels as Record<string, unknown>)[label] ?? '')]),
      );
      const key = keyOf(name, sumBy);
      const series = reading.get(key);
      if (series === undefined) reading.set(key, { name, labels: sumBy, value });
      else series.value += value;
    }
  }
  return reading;
}

type Match = (labels: Series['labels']) => boolean;
const every: Match = () => true;

/** `name`'s sums by one of its labels (`''` for a series without it), of the series `match` keeps. */
function byLabel(reading: Reading, name: string, label: string, match = every): Map<string, number> {
  const sums = new Map<string, number>();
  for (const { name: own, labels, value } of reading.values()) {
    if (own !== name || !match(labels)) continue;
    const key = labels[label] ?? '';
    sums.set(key, (sums.get(key) ?? 0) + value);
  }
  return sums;
}

/** The sum of `name`'s series; undefined when the registry has no such metric. */
function total(reading: Reading, name: string): number | undefined {
  const sums = byLabel(reading, name, '');
  return sums.size === 0 ? undefined : sums.get('');
}

/** The upstream's own faults, as gateway_operation_faults_total counts them: a 5xx, or an answer that never came. */
const FAULT_CODES = new Set(['UPSTREAM_TIMEOUT', 'UPSTREAM_UNAVAILABLE', 'UPSTREAM_OUTCOME_UNKNOWN', 'UPSTREAM_ERROR']);
const isFault: Match = (labels) => Number(labels.status) >= 500 || FAULT_CODES.has(labels.status ?? '');

/**
 * The `q` quantile of the buckets (cumulative counts by upper bound, in order) as Prometheus's histogram_quantile
 * estimates it: linear within its bucket, the highest finite bound in the +Inf one; null when they counted nothing.
 */
export function quantile(q: number, buckets: readonly (readonly [number, number])[]): number | null {
  const count = buckets.at(-1)?.[1] ?? 0;
  if (count <= 0) return null;
  const rank = q * count;
  let [lower, below] = [0, 0];
  for (const [bound, cumulative] of buckets) {
    if (cumulative >= rank) {
      if (bound === Number.POSITIVE_INFINITY) return lower;
      return lower + (bound - lower) * ((rank - below) / (cumulative - below || 1));
    }
    [lower, below] = [bound, cumulative];
  }
  return lower;
}

/** Whether each Redis connection (REDIS_URL's, RESPONSE_CACHE_REDIS_URL's) can take a command now. */
export type RedisStates = Readonly<Record<string, () => boolean>>;

/**
 * The figures of one point, by chart: rates per second over the `seconds` since `before` (the counters' differences),
 * p50 and p99 of the operations answered in between (the buckets' differences; refused ones aside, instant, they would
 * hide the latency), gauges as they are `now`.
 */
export function pointOf(now: Reading, before: Reading, seconds: number, redis: RedisStates) {
  const point = new Map<string, number | null>();
  const rates = (chart: string, name: string, label: string, match = every) => {
    const earlier = byLabel(before, name, label, match);
    for (const [value, count] of byLabel(now, name, label, match))
      point.set(value === '' ? chart : `${chart}:${value}`, Math.max(0, count - (earlier.get(value) ?? 0)) / seconds);
  };
  const gauge = (chart: string, name: string, scale = 1) => {
    const value = total(now, name);
    if (value !== undefined) point.set(chart, value * scale);
  };
  rates('ops', 'gateway_operation_duration_seconds_count', 'outcome');
  const answered: Match = (labels) => labels.outcome !== 'refused';
  const bucket = 'gateway_operation_duration_seconds_bucket';
  const earlier = byLabel(before, bucket, 'le', answered);
  const buckets = [...byLabel(now, bucket, 'le', answered)]
    .map(([le, count]): [number, number] => [Number(le), count - (earlier.get(le) ?? 0)])
    .sort((a, b) => a[0] - b[0]);
  for (const q of [0.5, 0.99]) {
    const seconds = quantile(q, buckets);
    point.set(`latency:p${q * 100}`, seconds === null ? null : seconds * 1_000);
  }
  rates('calls', 'gateway_upstream_call_duration_seconds_count', 'operation');
  rates('faults', 'gateway_upstream_call_duration_seconds_count', 'operation', isFault);
  gauge('inFlight', 'gateway_operations_in_flight');
  rates('refused', 'gateway_refusals_total', 'limit', (labels) => labels.limit !== 'overloaded');
  rates('refused:overloaded', 'gateway_overload_refusals_total', 'reason');
  rates('lookups', 'gateway_response_cache_lookups_total', 'result');
  gauge('cacheEntries', 'gateway_response_cache_entries');
  gauge('subscriptions', 'gateway_subscriptions_open');
  rates('events', 'gateway_subscription_events_total', '');
  rates('fallbacks', 'gateway_shared_state_fallbacks_total', 'store');
  for (const [connection, ready] of Object.entries(redis)) point.set(`redis:${connection}`, ready() ? 1 : 0);
  gauge('loopDelay', 'gateway_shedding_event_loop_delay_seconds', 1_000);
  gauge('memory:rss', 'process_resident_memory_bytes', 1 / 2 ** 20);
  gauge('memory:heap', 'nodejs_heap_size_used_bytes', 1 / 2 ** 20);
  return point;
}

/** An upstream route now: its breaker (0 closed, 1 open, 2 half-open), its attempts, their faults, calls it refused. */
export interface RouteNow {
  readonly route: string;
  readonly breaker: number;
  readonly calls: number;
  readonly faults: number;
  readonly refused: number;
}

/** Each route's breaker and counts in `now`; the host's breaker as the route `host`. */
export function routesOf(now: Reading): RouteNow[] {
  const calls = 'gateway_upstream_call_duration_seconds_count';
  const [attempts, faults] = [byLabel(now, calls, 'operation'), byLabel(now, calls, 'operation', isFault)];
  const refused = byLabel(now, 'gateway_upstream_circuit_refusals_total', 'operation');
  const routes = [...byLabel(now, 'gateway_upstream_circuit_state', 'operation')].map(([route, breaker]) => ({
    route,
    breaker,
    calls: attempts.get(route) ?? 0,
    faults: faults.get(route) ?? 0,
    refused: refused.get(route) ?? 0,
  }));
  const host = total(now, 'gateway_upstream_host_circuit_state');
  if (host !== undefined) routes.push({ route: 'host', breaker: host, calls: 0, faults: 0, refused: 0 });
  return routes;
}
