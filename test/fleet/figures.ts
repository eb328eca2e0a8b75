import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { inject } from 'vitest';
import { gatewayDir, repoRoot } from './checkout.js';

/*
 * What each scenario measured: one line per figure on the console, and all of a run's figures in
 * bench/results/fleet/<run>.json (ignored by git, as every bench result), with the build they
 * were measured on, for the before/after notes of a change.
 */

interface Summary {
  run: string;
  gatewayDir: string;
  commit: string;
  haproxyConfig: string;
  scenarios: Record<string, Record<string, unknown>>;
}

export function recordFigures(scenario: string, figures: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(figures))
    console.log(`[fleet] ${scenario}: ${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
  const run = inject('fleetRun');
  const file = join(repoRoot, 'bench', 'results', 'fleet', `${run}.json`);
  mkdirSync(dirname(file), { recursive: true });
  // The scenarios run one file after another (no file parallelism), each adding its own.
  const summary: Summary = existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as Summary)
    : {
        run,
        gatewayDir,
        commit: inject('fleetCommit'),
        haproxyConfig: process.env.FLEET_HAPROXY_CONFIG || 'deploy/haproxy/haproxy.cfg',
        scenarios: {},
      };
  summary.scenarios[scenario] = figures;
  writeFileSync(file, `${JSON.stringify(summary, null, 2)}\n`);
}
