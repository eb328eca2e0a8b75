import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Builds the gateway once per run (`npm run build`, as `npm start` does): the tests that start it
 * as a process of its own run `dist/main.js` (support/process.ts), as an operator runs it.
 */
export default function setup(): void {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`npm run build failed (${build.status}):\n${build.stdout}${build.stderr}`);
}
