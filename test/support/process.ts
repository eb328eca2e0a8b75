import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';

/**
 * `npm start` from source with `env` on top of ours; `ready` resolves with its endpoint once it
 * says it listens (with WORKERS>1 the primary says so after every worker listens).
 */
export function spawnGateway(env: Record<string, string>): { child: ChildProcessWithoutNullStreams; ready: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { ...process.env, PORT: '0', UPSTREAM_URL: '', LOG_LEVEL: 'warn', ...env } });
  let stdout = '';
  const ready = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const listening = /Gateway listening on (\S+)/.exec(stdout);
      if (listening !== null) resolve(listening[1]!);
    });
    child.once('exit', () => reject(new Error(`gateway exited before listening: ${stdout}`)));
  });
  return { child, ready };
}
