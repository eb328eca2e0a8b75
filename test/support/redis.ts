import { type ChildProcess, spawn } from 'node:child_process';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/server/instruments/logger.js';
import type { GatewayMetrics } from '../../src/server/instruments/metrics.js';
import { connectSharedState, type SharedRedis } from '../../src/server/shared-state/shared-redis.js';
import { endProcess, freePort } from './process.js';
import { requireProgram } from './services.js';

/** A real redis-server (the Debian package) on a free loopback port, in memory only. */
export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  /** Stops it (SIGKILL: gone at once, as a crash would); `start` brings it back on the same port, empty. */
  stop(): Promise<void>;
  start(): Promise<void>;
}

/** What redis-server prints once it serves; a Sentinel says it once it watches its master instead. */
const serving = /Ready to accept connections|\+monitor master/;

/**
 * Runs `redis-server <args>` (a node, a Cluster node, a Sentinel: `redis-server sentinel.conf
 * --sentinel`) and resolves with it once it serves; rejects with its output if it exits first.
 */
export async function spawnRedisServer(args: readonly string[]): Promise<ChildProcess> {
  const server = spawn(requireProgram('redis-server'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (serving.test(output)) {
        server.stdout!.off('data', onData);
        resolve();
      }
    };
    server.stdout!.on('data', onData);
    server.once('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
    server.once('error', reject);
  });
  // Its later output is not read: drained so the pipe never fills.
  server.stdout!.resume();
  server.stderr!.resume();
  return server;
}

/** Loopback only, no snapshot or append-only file (a replica still writes what it syncs to its `--dir`). */
export const inMemoryOnLoopback = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'] as const;

/** `args`: more redis-server options, e.g. `['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction']`. */
export async function startRedis(options: { args?: readonly string[] } = {}): Promise<RedisProcess> {
  const port = await freePort();
  let child: ChildProcess | undefined;

  const start = async () => {
    child = await spawnRedisServer(['--port', String(port), ...inMemoryOnLoopback, ...(options.args ?? [])]);
  };

  const stop = async () => {
    const running = child;
    child = undefined;
    if (running !== undefined) await endProcess(running);
  };

  await start();
  return { port, url: `redis://127.0.0.1:${port}`, stop, start };
}

/** A process's connection to the Redis `url` names (any REDIS_URL form), as main.ts makes it, logging nothing. */
export function connectRedis(url: string, metrics: Pick<GatewayMetrics, 'sharedStateFallbacks'>): Promise<SharedRedis> {
  return connectSharedState(loadConfig({ REDIS_URL: url }).redis!, createLogger({ level: 'silent' }), metrics);
}
