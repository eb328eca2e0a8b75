import type { Registry } from 'prom-client';
import { pointOf, type Reading, type RedisStates, type RouteNow, readRegistry, routesOf } from './readings.js';

/** How often the sampler reads the metrics, and how many points it keeps: 180 of 5 s, the last 15 minutes. */
export const SAMPLE_EVERY_MS = 5_000;
export const POINTS = 180;
/**
 * Series a point may hold, each a column of its Float64Array: what they sum by is a fixed set (the routes, outcomes,
 * limits, reasons, stores), some 70 in all; a series past this is not charted. So the points hold POINTS × MAX_SERIES
 * × 8 bytes (173 KB) at most, however long the process runs.
 */
export const MAX_SERIES = 120;
/** The callers holding the most operations in flight that the page lists. */
const HOLDERS_SHOWN = 5;

/** A caller holding operations in flight, by its key hashed (traffic/caller-shares.ts: never a token or address). */
export interface Holder {
  readonly caller: string;
  readonly inFlight: number;
}

/** Where the page's figures come from: the metrics' registry, the probes' readiness, the shedder's callers. */
export interface StatusSources {
  readonly registry: Registry;
  /** `/ready`'s check (cached) and its reason not to be ready whatever the upstream answered. */
  readonly ready: () => Promise<boolean>;
  readonly notReadyBecause?: (() => string | undefined) | undefined;
  /** The callers holding the most operations in flight now, most first. */
  readonly heaviest?: ((count: number) => readonly Holder[]) | undefined;
  readonly redis?: RedisStates | undefined;
}

/** At a glance: `healthy`, `degraded` (serving, with the reasons), or `not ready` (what /ready says, and why). */
export interface Health {
  readonly state: 'healthy' | 'degraded' | 'not ready';
  readonly reasons: readonly string[];
}

/** What /status/samples answers: the health, the points of the last 15 minutes by series, the sums now. */
export interface StatusSnapshot {
  readonly health: Health;
  readonly everyMs: number;
  /** How far back the points go once the ring is full: POINTS intervals. */
  readonly windowSeconds: number;
  readonly pid: number;
  readonly uptimeSeconds: number;
  /** Each point's time, in seconds since the epoch (uPlot's time scale). */
  readonly at: readonly number[];
  /** Each series' value at each point (null where it had none), by key: `<chart>` or `<chart>:<label value>`. */
  readonly series: Readonly<Record<string, readonly (number | null)[]>>;
  /** The sums as /metrics would print them now (histogram buckets aside), by `name{label="value",…}`. */
  readonly now: Readonly<Record<string, number>>;
  /** Each upstream route's breaker and counts now, from `now`; the host's breaker as `host`. */
  readonly routes: readonly RouteNow[];
  readonly holders: readonly Holder[];
}

/** The last `size` items pushed, oldest first: an array written round, never longer than `size`. */
export class Ring<T> {
  readonly #items: T[] = [];
  #next = 0;

  constructor(readonly size: number) {}

  push(item: T): void {
    this.#items[this.#next] = item;
    this.#next = (this.#next + 1) % this.size;
  }

  items(): T[] {
    return [...this.#items.slice(this.#next), ...this.#items.slice(0, this.#next)];
  }
}

interface Point {
  readonly at: number;
  readonly values: Float64Array;
}

const rounded = (value: number | undefined) =>
  value === undefined || Number.isNaN(value) ? null : Math.round(value * 1_000) / 1_000;

/**
 * The status page's memory: every `everyMs` (on an unref'd timer, stopped by `close`) a reading of the registry, and a
 * point of what changed since the one before, kept in a ring of POINTS. It counts nothing itself: every figure is a
 * series of /metrics, read from the same instruments.
 */
export class StatusSampler {
  readonly #points = new Ring<Point>(POINTS);
  /** Each series' column in a point's values, in the order first seen. */
  readonly #columns = new Map<string, number>();
  #last: { readonly reading: Reading; readonly at: number } | undefined;
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly sources: StatusSources,
    readonly everyMs = SAMPLE_EVERY_MS,
  ) {
    // A reading that fails (a collect throwing) is a point missed, not a crash.
    const sample = () => void this.sample().catch(() => undefined);
    this.#timer = setInterval(sample, everyMs).unref();
    sample();
  }

  /** Reads the registry and keeps a point of the change since the last reading (the first one only starts). */
  async sample(): Promise<void> {
    const at = Date.now();
    const reading = await readRegistry(this.sources.registry);
    const last = this.#last;
    this.#last = { reading, at };
    if (last === undefined || at <= last.at) return;
    const values = new Float64Array(MAX_SERIES).fill(Number.NaN);
    for (const [key, value] of pointOf(reading, last.reading, (at - last.at) / 1_000, this.sources.redis ?? {})) {
      if (!this.#columns.has(key) && this.#columns.size < MAX_SERIES) this.#columns.set(key, this.#columns.size);
      const column = this.#columns.get(key);
      if (column !== undefined && value !== null) values[column] = value;
    }
    this.#points.push({ at, values });
  }

  /** The page's figures: the points kept, and a reading taken now (as a scrape now would print it). */
  async snapshot(): Promise<StatusSnapshot> {
    const now = await readRegistry(this.sources.registry);
    const points = this.#points.items();
    const series = Object.fromEntries(
      [...this.#columns].map(([key, column]) => [key, points.map((point) => rounded(point.values[column]))]),
    );
    const last = points.at(-1)?.values;
    const latest = new Map<string, number>();
    for (const [key, column] of this.#columns)
      if (last !== undefined && !Number.isNaN(last[column])) latest.set(key, last[column]!);
    const routes = routesOf(now);
    return {
      health: await this.#health(routes, latest),
      everyMs: this.everyMs,
      windowSeconds: (this.everyMs * POINTS) / 1_000,
      pid: process.pid,
      uptimeSeconds: Math.round(process.uptime()),
      at: points.map((point) => point.at / 1_000),
      series,
      now: Object.fromEntries(
        [...now].filter(([, { name }]) => !name.endsWith('_bucket')).map(([key, { value }]) => [key, value]),
      ),
      routes,
      holders: this.sources.heaviest?.(HOLDERS_SHOWN) ?? [],
    };
  }

  close(): void {
    clearInterval(this.#timer);
  }

  /** Not ready as /ready says; else degraded by whatever is open, refused or failing now or in the last interval. */
  async #health(routes: readonly RouteNow[], latest: ReadonlyMap<string, number>): Promise<Health> {
    const because = this.sources.notReadyBecause?.();
    const ready = because === undefined && (await this.sources.ready().catch(() => false));
    const reasons = ready ? [] : [`not ready: ${because ?? 'the upstream did not answer its last probe'}`];
    for (const { route, breaker } of routes)
      if (breaker !== 0)
        reasons.push(
          `${route}: breaker ${breaker === 1 ? 'open' : 'half-open'}${route === 'host' ? ' (every call)' : ''}`,
        );
    const per = (rate: number) => `${rate < 10 ? rate.toFixed(1) : Math.round(rate)}/s`;
    for (const [key, value] of latest) {
      const [chart, ...rest] = key.split(':');
      const label = rest.join(':');
      if (chart === 'faults' && value > 0) reasons.push(`${label}: upstream faults, ${per(value)}`);
      if (chart === 'refused' && label.startsWith('overloaded:') && value > 0)
        reasons.push(`refusing for overload (${label.slice('overloaded:'.length)}), ${per(value)}`);
      if (chart === 'fallbacks' && value > 0) reasons.push(`Redis: ${label} served from process memory, ${per(value)}`);
    }
    for (const [connection, up] of Object.entries(this.sources.redis ?? {}))
      if (!up()) reasons.push(`Redis (${connection}) not connected: its stores answer from process memory`);
    return { state: !ready ? 'not ready' : reasons.length > 0 ? 'degraded' : 'healthy', reasons };
  }
}
