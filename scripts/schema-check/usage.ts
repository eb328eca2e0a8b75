import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { SCHEMA_USAGE_METRIC } from '../../src/server/instruments/usage-metrics.js';

/*
 * Field usage from the fleet: what `gateway_schema_coordinate_uses_total` counted, by coordinate
 * and client, read from Prometheus (its HTTP API, `sum by (coordinate, client_name,
 * client_version) (increase(…[period]))`), from that query's JSON saved to a file, or from the
 * text a gateway's /metrics answers (its counters' totals since it started). Only `--usage` makes
 * the check read any of it: without it the check needs no network.
 */

/** One client's uses of a coordinate (its labels as the gateway bounded them). */
export interface ClientUses {
  readonly clientName: string;
  readonly clientVersion: string;
  readonly uses: number;
}

export interface Usage {
  /**
   * What the counts cover, said after them: `in 7 days`, `since each gateway started` (/metrics text: counter totals).
   */
  readonly period: string;
  readonly byCoordinate: ReadonlyMap<string, readonly ClientUses[]>;
}

const units: Record<string, string> = {
  ms: 'millisecond',
  s: 'second',
  m: 'minute',
  h: 'hour',
  d: 'day',
  w: 'week',
  y: 'year',
};

/** A Prometheus duration of one unit (`7d`, `24h`), the only shape the check puts in a query. */
export function checkedPeriod(period: string): { readonly promql: string; readonly words: string } {
  const match = /^(\d+)(ms|s|m|h|d|w|y)$/.exec(period);
  if (match === null || Number(match[1]) === 0)
    throw new Error(`--period: expected a Prometheus duration such as 7d, 24h or 30m, got ${JSON.stringify(period)}`);
  const count = Number(match[1]);
  return { promql: period, words: `${count} ${units[match[2]!]}${count === 1 ? '' : 's'}` };
}

/** The query the check asks Prometheus: each coordinate's uses by client over `period`. */
export const usageQuery = (period: string) =>
  `sum by (coordinate, client_name, client_version) (increase(${SCHEMA_USAGE_METRIC}[${checkedPeriod(period).promql}]))`;

/** Adds `uses` for a client to `into`, summing what several series (replicas) say of the same labels. */
function add(
  into: Map<string, Map<string, ClientUses>>,
  coordinate: string,
  clientName: string,
  clientVersion: string,
  uses: number,
): void {
  if (!Number.isFinite(uses) || uses <= 0) return;
  let clients = into.get(coordinate);
  if (clients === undefined) {
    clients = new Map();
    into.set(coordinate, clients);
  }
  const key = `${clientName}\n${clientVersion}`;
  clients.set(key, { clientName, clientVersion, uses: (clients.get(key)?.uses ?? 0) + uses });
}

const frozen = (into: Map<string, Map<string, ClientUses>>) =>
  new Map([...into].map(([coordinate, clients]) => [coordinate, [...clients.values()]] as const));

/** What Prometheus's /api/v1/query answers (an instant vector). */
const queryAnswer = z.object({
  status: z.literal('success'),
  data: z.object({
    resultType: z.literal('vector'),
    result: z.array(z.object({ metric: z.record(z.string(), z.string()), value: z.tuple([z.number(), z.string()]) })),
  }),
});

/** Prometheus's answer to `usageQuery` (from its API, or saved to a file). */
export function usageFromQueryAnswer(json: unknown, period: string): Usage {
  const parsed = queryAnswer.safeParse(json);
  if (!parsed.success)
    throw new Error(
      `expected Prometheus's answer to an instant query (status "success", a vector), as /api/v1/query gives it for: ${usageQuery('7d')}`,
    );
  const into = new Map<string, Map<string, ClientUses>>();
  for (const { metric, value } of parsed.data.data.result) {
    if (metric.coordinate === undefined) continue;
    add(
      into,
      metric.coordinate,
      metric.client_name ?? 'unknown',
      metric.client_version ?? 'unknown',
      Math.round(Number(value[1])),
    );
  }
  return { period: `in ${checkedPeriod(period).words}`, byCoordinate: frozen(into) };
}

/** A label value of the text format, its escapes (`\\`, `\"`, `\n`) undone. */
const unescaped = (value: string) => value.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));

/**
 * The counter's samples in Prometheus's text format (a gateway's /metrics, or several concatenated: replicas are
 * summed).
 */
export function usageFromExposition(text: string): Usage {
  const into = new Map<string, Map<string, ClientUses>>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${SCHEMA_USAGE_METRIC}{`)) continue;
    const close = line.lastIndexOf('}');
    const labels = Object.fromEntries(
      [...line.slice(SCHEMA_USAGE_METRIC.length + 1, close).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(
        ([, key, value]) => [key!, unescaped(value!)],
      ),
    );
    const [sample] = line
      .slice(close + 1)
      .trim()
      .split(/\s+/);
    if (labels.coordinate !== undefined)
      add(into, labels.coordinate, labels.client_name ?? 'unknown', labels.client_version ?? 'unknown', Number(sample));
  }
  return { period: 'since each gateway started', byCoordinate: frozen(into) };
}

/**
 * Usage from `source`: a Prometheus server's URL (its HTTP API is asked), or a file (the API's JSON, or /metrics text).
 */
export async function loadUsage(source: string, period: string, fetcher: typeof fetch = fetch): Promise<Usage> {
  if (/^https?:\/\//.test(source)) {
    const url = new URL(`${source.replace(/\/+$/, '').replace(/\/api\/v1\/query$/, '')}/api/v1/query`);
    url.searchParams.set('query', usageQuery(period));
    const response = await fetcher(url, { headers: { accept: 'application/json' } });
    const body = await response.text();
    if (!response.ok) throw new Error(`Prometheus at ${url.origin} answered ${response.status} to the usage query`);
    return usageFromQueryAnswer(JSON.parse(body), period);
  }
  const text = readFileSync(source, 'utf8');
  return text.trimStart().startsWith('{') ? usageFromQueryAnswer(JSON.parse(text), period) : usageFromExposition(text);
}

/** The uses of any of `coordinates`, by client pair, most first. */
export function usesOf(
  usage: Usage,
  coordinates: readonly string[],
): { readonly uses: number; readonly clients: readonly ClientUses[] } {
  const into = new Map<string, Map<string, ClientUses>>();
  for (const coordinate of coordinates)
    for (const use of usage.byCoordinate.get(coordinate) ?? [])
      add(into, '', use.clientName, use.clientVersion, use.uses);
  const clients = [...(into.get('')?.values() ?? [])].sort(
    (a, b) => b.uses - a.uses || a.clientName.localeCompare(b.clientName),
  );
  return { uses: clients.reduce((sum, client) => sum + client.uses, 0), clients };
}

/** A client as the check names it: `ios 3.2`, or `web` when it sent no version. */
const clientNamed = ({ clientName, clientVersion }: ClientUses) =>
  `\`${clientVersion === 'unknown' ? clientName : `${clientName} ${clientVersion}`}\``;

/** `1,204 uses by `ios 3.2` and `web` in 7 days`, or `no uses in 7 days`. */
export function describeUses(found: ReturnType<typeof usesOf>, period: string): string {
  if (found.uses === 0) return `no uses ${period}`;
  const names = found.clients.slice(0, 5).map(clientNamed);
  if (found.clients.length > 5) names.push(`${found.clients.length - 5} more`);
  const listed = names.length === 1 ? names[0] : `${names.slice(0, -1).join(', ')} and ${names.at(-1)}`;
  return `${found.uses.toLocaleString('en-US')} ${found.uses === 1 ? 'use' : 'uses'} by ${listed} ${period}`;
}
