import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * `npm run bench:peers -- [options of run.mjs]`: the peer bench of `../shared/peer-bench`, run with
 * the same arguments, once its dependencies are installed. Without them run.mjs would stop on a
 * raw MODULE_NOT_FOUND; this says what to run instead.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const peerBench = join(root, '..', 'shared', 'peer-bench');
const runner = join(peerBench, 'run.mjs');

function missing(): string | undefined {
  if (!existsSync(runner))
    return `The peer bench is not there: ${runner} is missing (it comes with the shared/ folder beside this checkout).`;
  if (!existsSync(join(peerBench, 'node_modules')))
    return 'The peer bench has no node_modules: run `cd ../shared/peer-bench && npm ci` once, then this again.';
  return undefined;
}

const problem = missing();
if (problem !== undefined) {
  console.error(problem);
  process.exit(1);
}

/*
 * The harness stops a target with SIGTERM to its process group and may start the next one on the
 * same port at once (the team last in one round and first in the next). `npm start`'s npm exits
 * at once; the gateway, as in production, goes on serving for SHUTDOWN_DELAY_MS (5 s) while the
 * load balancer takes it out of rotation: the new target's readiness check then reached the old
 * process, whose close broke the measured connections (15,119 socket errors in one cell). Without
 * a load balancer there is nothing to wait for. An option given after this one overrides it.
 */
const leaveAtOnce = ['--team-env', 'SHUTDOWN_DELAY_MS=0'];
const bench = spawn(process.execPath, [runner, ...leaveAtOnce, ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
});
// Ctrl-C reaches the bench too (same process group): wait for it to clean up and exit.
process.on('SIGINT', () => {});
bench.on('exit', (code) => process.exit(code ?? 1));
