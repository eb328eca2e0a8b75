import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { freePort } from './process.js';
import { requireProgram } from './services.js';

/** A real redis-server (the Debian package) on a free loopback port, in memory only. */
export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  /** Stops it (SIGKILL: gone at once, as a crash would); `start` brings it back on the same port, empty. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

/** `args`: more redis-server options, e.g. `['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction']`. */
export async function startRedis(options: { args?: readonly string[] } = {}): Promise<RedisProcess> {
  const program = requireProgram('redis-server');
  const port = await freePort();
  let child: ChildProcess | undefined;

  const start = async () => {
    const process = spawn(program, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...(options.args ?? [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = process;
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Ready to accept connections')) {
          process.stdout!.off('data', onData);
          resolve();
        }
      };
      process.stdout!.on('data', onData);
      process.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
      process.once('error', reject);
    });
    // Its later output is not read: drained so the pipe never fills.
    process.stdout!.resume();
    process.stderr!.resume();
  };

  const stop = async () => {
    const running = child;
    child = undefined;
    if (running === undefined || running.exitCode !== null) return;
    const exited = once(running, 'exit');
    running.kill('SIGKILL');
    await exited;
  };

  await start();
  return { port, url: `redis://127.0.0.1:${port}`, stop, start };
}
