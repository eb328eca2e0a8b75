import { type ChildProcess, type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

/** The gateway as an operator runs it (`npm start`): `dist/main.js` in a process of its own. */
export interface GatewayProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** The URL of its "Gateway listening on" line. */
  readonly endpoint: string;
  /** What it wrote to stdout so far. */
  stdout(): string;
  /** Its exit code (null if a signal ended it). */
  readonly exited: Promise<number | null>;
  /** Ends it with SIGKILL if it is still running: for `finally` blocks. */
  kill(): void;
}

/** What runs the gateway: node's arguments, in `cwd` (this process's directory unless given). */
export interface GatewayCommand {
  readonly args: readonly string[];
  readonly cwd?: string;
}

/**
 * `npm start` without its build step: a built checkout's `dist/main.js`, in that checkout (the fleet test runs older
 * builds too).
 */
export const fromBuild = (checkout: string): GatewayCommand => ({ args: ['dist/main.js'], cwd: checkout });

/** This checkout's build, made once per run by test/support/global-setup.ts. */
export const thisBuild: GatewayCommand = fromBuild(fileURLToPath(new URL('../..', import.meta.url)));

/**
 * Starts this checkout's build (or `command`) with `env` over this process's environment (PORT 0
 * unless `env` says) and resolves once it prints its "Gateway listening on" line.
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  command: GatewayCommand = thisBuild,
): Promise<GatewayProcess> {
  const child = spawn(process.execPath, [...command.args], {
    cwd: command.cwd,
    env: { ...process.env, PORT: '0', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const endpoint = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /Gateway listening on (\S+)/.exec(stdout);
      if (match) resolve(match[1]!);
    });
    void exited.then((code) => reject(new Error(`the gateway exited (${code}) before listening:\n${stdout}${stderr}`)));
  });
  return {
    child,
    endpoint,
    stdout: () => stdout,
    exited,
    kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** Whether a TCP connection to `url`'s host and port is accepted (false: refused). */
export function acceptsConnections(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    // A connection caught in the listen queue as the server stops listening is reset, not refused:
    // it was not accepted either.
    socket.once('error', (error: NodeJS.ErrnoException) =>
      error.code === 'ECONNREFUSED' || error.code === 'ECONNRESET' ? resolve(false) : reject(error),
    );
  });
}

/** A port nobody listens on right now: the OS picks one and it is released again. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}

/** `count` distinct ports nobody listens on right now: all held at once while the OS picks them, then released. */
export async function freePorts(count: number): Promise<number[]> {
  const probes = Array.from({ length: count }, () => createServer().listen(0, '127.0.0.1'));
  await Promise.all(probes.map((probe) => (probe.listening ? undefined : once(probe, 'listening'))));
  const ports = probes.map((probe) => (probe.address() as { port: number }).port);
  await Promise.all(probes.map((probe) => new Promise((resolve) => probe.close(resolve))));
  return ports;
}

/** Sends `signal` to `child` unless it has exited, and resolves once it has (at once if it had). */
export async function endProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill(signal);
  await exited;
}
