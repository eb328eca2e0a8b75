import { z } from 'zod';
import { loadRouteTable, RouteConfigError, type RouteTable } from './upstream/routes.js';

const integer = (min: number, max: number) =>
  z.coerce
    .number({ error: `an integer from ${min} to ${max}` })
    .int({ error: `an integer from ${min} to ${max}` })
    .min(min, { error: `an integer from ${min} to ${max}` })
    .max(max, { error: `an integer from ${min} to ${max}` });

const upstreamUrl = z
  .url({ protocol: /^https?$/, error: 'an http(s) URL ending in /v2' })
  .transform((url) => url.replace(/\/+$/, ''))
  .refine((url) => url.endsWith('/v2'), { error: 'an http(s) URL ending in /v2' });

const environment = z.object({
  UPSTREAM_URL: upstreamUrl.optional(),
  PORT: integer(0, 65_535).default(4000),
  HOST: z.string().min(1, { error: 'a host name or address' }).default('127.0.0.1'),
  UPSTREAM_TIMEOUT_MS: integer(1, 600_000).default(10_000),
  UPSTREAM_CONNECTIONS: integer(1, 10_000).default(100),
  UPSTREAM_ROUTES_FILE: z.string().min(1, { error: 'a path to a JSON file' }).optional(),
  NODE_ENV: z.string().optional(),
});

export interface Config {
  /** Base URL of the /v2 API; undefined means "start the embedded reference upstream". */
  readonly upstreamUrl: string | undefined;
  readonly port: number;
  readonly host: string;
  readonly upstreamTimeoutMs: number;
  readonly upstreamConnections: number;
  readonly routes: RouteTable;
  readonly production: boolean;
}

/** A configuration problem, worded for one line on stderr: `VARIABLE: expected ...`. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment once; empty strings count as unset so `PORT=` falls back to the default. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== ''));
  const parsed = environment.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0]);
    throw new ConfigError(`${variable}: expected ${issue.message}, got ${JSON.stringify(env[variable])}`);
  }
  const e = parsed.data;
  let routes: RouteTable;
  try {
    routes = loadRouteTable(e.UPSTREAM_ROUTES_FILE);
  } catch (error) {
    if (error instanceof RouteConfigError) throw new ConfigError(`UPSTREAM_ROUTES_FILE: ${error.message}`);
    throw error;
  }
  return Object.freeze({
    upstreamUrl: e.UPSTREAM_URL,
    port: e.PORT,
    host: e.HOST,
    upstreamTimeoutMs: e.UPSTREAM_TIMEOUT_MS,
    upstreamConnections: e.UPSTREAM_CONNECTIONS,
    routes,
    production: e.NODE_ENV === 'production',
  });
}
