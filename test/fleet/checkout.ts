import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** This repository. */
export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));

/** The checkout whose `dist/main.js` the fleet's gateways run: FLEET_GATEWAY_DIR, or this one. */
export const gatewayDir = resolve(process.env.FLEET_GATEWAY_DIR || repoRoot);

/** The checkout's commit, `+` when its tree has changes: what the figures were measured on. */
export function commitOf(dir: string): string {
  const git = (...args: string[]) => spawnSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).stdout.trim();
  const commit = git('rev-parse', '--short', 'HEAD');
  return commit === ''
    ? 'unknown'
    : `${commit}${git('status', '--porcelain', '--untracked-files=no') === '' ? '' : '+'}`;
}
