import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { commitOf, gatewayDir, repoRoot } from './checkout.js';

declare module 'vitest' {
  interface ProvidedContext {
    /** This run's name: the figures file is bench/results/fleet/<fleetRun>.json. */
    fleetRun: string;
    /** The commit the gateways run (`3fb7890`, `+` for changes on top). */
    fleetCommit: string;
  }
}

/**
 * Builds this checkout (the gateways run `dist/main.js`, as `npm start` does); another one, named
 * by FLEET_GATEWAY_DIR, must be built already (`npm ci && npm run build` there).
 */
export default function setup(project: TestProject): void {
  if (gatewayDir === repoRoot) {
    const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: repoRoot, encoding: 'utf8' });
    if (build.status !== 0) throw new Error(`npm run build failed (${build.status}):\n${build.stdout}${build.stderr}`);
  } else if (!existsSync(join(gatewayDir, 'dist', 'main.js'))) {
    throw new Error(`FLEET_GATEWAY_DIR=${gatewayDir} has no dist/main.js: run \`npm ci && npm run build\` there first`);
  }
  project.provide('fleetRun', new Date().toISOString().replace(/[:.]/g, '-'));
  project.provide('fleetCommit', commitOf(gatewayDir));
}
