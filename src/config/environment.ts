import { z } from 'zod';
import { callerLimits, loadShedding } from './environment-callers.js';
import { apqSharing, execution, persistedDocuments } from './environment-documents.js';
import { redis, workerProcesses } from './environment-fleet.js';
import { documentLimits, requestBudgets } from './environment-limits.js';
import { logs, metrics, tracing } from './environment-observability.js';
import { realTime } from './environment-real-time.js';
import { responseCache } from './environment-response-cache.js';
import { browsers, compression, connections, listening, nodeEnv } from './environment-server.js';
import { upstreamAddress, upstreamTraffic } from './environment-upstream.js';

/*
 * The environment the gateway reads: every variable once, with its default, its limits and what
 * it does. README.md's configuration table is rendered from this (scripts/config-table.ts, `npm
 * run generate`), so a default or a range is changed where its variable is declared and nowhere
 * else. A variable that is a setting as parsed names its place in the settings the layers below
 * are handed (`setting('limits.maxDepth', …)`, config/places.ts), and the settings are built from
 * those places; config.ts makes the others' settings itself, those that take several variables or
 * a check (MAX_CONNECTIONS from the descriptor limit, INTROSPECTION's default, the response
 * cache). The variables are declared by concern, in the environment-*.ts files beside this one,
 * and composed here in the table's order.
 */

export const environment = z.object({
  ...upstreamAddress,
  ...listening,
  ...requestBudgets,
  ...upstreamTraffic,
  ...documentLimits,
  ...persistedDocuments,
  ...compression,
  ...callerLimits,
  ...loadShedding,
  ...redis,
  ...apqSharing,
  ...responseCache,
  ...metrics,
  ...browsers,
  ...execution,
  ...workerProcesses,
  ...realTime,
  ...connections,
  ...logs,
  ...nodeEnv,
  ...tracing,
});

export type Environment = z.infer<typeof environment>;
