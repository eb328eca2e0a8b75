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
const HOLDERS_SHOWN = 5;

/** A caller holding operations in flight, by its key hashed (traffic/caller-shares.ts: never a token or address). */
export interface Holder {
  readonly caller: string;
  readonly inFlight: number;
}

export interface StatusSources {
  readonly registry: Registry;
  /** `/ready`'s check (cached) and its reason not to be ready whatever the upstream answered. */
  readonly ready: () => Promise<boolean>;
  readonly notReadyBecause?: (() => string | undefined) | undefined;
  /** Most first. */
  readonly heaviest?: ((count: number) => readonly Holder[]) | undefined;
  readonly redis?: RedisStates | undefined;
}

/** What /status/samples answers: the health, the points of the last 15 minutes by series, the sums now. */
export interface StatusSnapshot {
  /** At a glance: `healthy`, `degraded` (serving, with the reasons), or `not ready` (what /ready says, and why). */
  readonly health: { readonly state: 'healthy' | 'degraded' | 'not ready'; readonly reasons: readonly string[] };
  readonly everyMs: number;
  /** How far back the points go once POINTS are kept. */
  readonly windowSeconds: number;
  readonly pid: number;
  readonly uptimeSeconds: number;
  /** Each point's time, in seconds since the epoch (uPlot's time scale). */
  readonly at: readonly number[];
  /** Each series' value at each point (null where it had none), by key: `<chart>` or `<chart>:<label value>`. */
  readonly series: Readonly<Record<string, readonly (number | null)[]>>;
  /** The sums as /metrics would print them now (histogram buckets aside), by `name{label="value",…}`. */
  readonly now: Readonly<Record<string, number>>;
  readonly routes: readonly RouteNow[];
  readonly holders: readonly Holder[];
}

const rounded = (value: number | undefined) =>
  value === undefined || Number.isNaN(value) ? null : Math.round(value * 1_000) / 1_000;

/**
 * Every `everyMs` (an unref'd timer, stopped by `close`) a point of what changed in the registry since the reading
 * before, the last POINTS kept: it counts nothing itself, every figure is a series of /metrics.
 */
export class StatusSampler {
  /** Oldest first: each point's time and its values, by column. */
  readonly #points: { readonly at: number; readonly values: Float64Array }[] = [];
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
    if (this.#points.length > POINTS) this.#points.shift();
  }

  /** The page's figures: the points kept, and a reading taken now (as a scrape now would print it). */
  async snapshot(): Promise<StatusSnapshot> {
    const now = await readRegistry(this.sources.registry);
    const points = [...this.#points];
    const series = Object.fromEntries(
      [...this.#columns].map(([key, column]) => [key, points.map((point) => rounded(point.values[column]))]),
    );
    const routes = routesOf(now);
    return {
      health: await this.#health(routes, points.at(-1)?.values),
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
  async #health(routes: readonly RouteNow[], last: Float64Array | undefined): Promise<StatusSnapshot['health']> {
    const because = this.sources.notReadyBecause?.();
    const ready = because === undefined && (await this.sources.ready().catch(() => false));
    const reasons = ready ? [] : [`not ready: ${because ?? 'the upstream did not answer its last probe'}`];
    for (const { route, breaker } of routes)
      if (breaker !== 0)
        reasons.push(
          `${route}: breaker ${breaker === 1 ? 'open' : 'half-open'}${route === 'host' ? ' (every call)' : ''}`,
        );
    const per = (rate: number) => `${rate < 10 ? rate.toFixed(1) : Math.round(rate)}/s`;
    for (const [key, column] of this.#columns) {
      const rate = last?.[column] ?? Number.NaN;
      if (!(rate > 0)) continue; // NaN too: no value in the last point
      const [chart, ...rest] = key.split(':');
      const label = rest.join(':');
      if (chart === 'faults') reasons.push(`${label}: upstream faults, ${per(rate)}`);
      if (chart === 'refused' && label.startsWith('overloaded:'))
        reasons.push(`refusing for overload (${label.slice('overloaded:'.length)}), ${per(rate)}`);
      if (chart === 'fallbacks') reasons.push(`Redis: ${label} served from process memory, ${per(rate)}`);
    }
    for (const [connection, up] of Object.entries(this.sources.redis ?? {}))
      if (!up()) reasons.push(`Redis (${connection}) not connected: its stores answer from process memory`);
    return { state: !ready ? 'not ready' : reasons.length > 0 ? 'degraded' : 'healthy', reasons };
  }
}
