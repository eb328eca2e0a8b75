import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * Log lines go out through pino's asynchronous destination (src/server/instruments/logger.ts): what is still
 * waiting when the process crashes is written on the way out, by pino, so a crash loses no line.
 */

const FIXTURE = fileURLToPath(new URL('./fixtures/crash-after-logging.ts', import.meta.url));

describe('log lines', () => {
  it.each([3, 5_000])(
    '%i lines logged just before an uncaught exception are all on stdout after the crash',
    async (count) => {
      const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
        env: { ...process.env, LINES: String(count) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      const [code] = (await once(child, 'close')) as [number | null];
      expect(code).toBe(1);
      const lines = stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => (JSON.parse(line) as { line: number }).line);
      // Every line, once; the one whose write was under way may land after those written on the way out.
      expect(lines.sort((a, b) => a - b)).toEqual(Array.from({ length: count }, (_, i) => i));
    },
    30_000,
  );
});
