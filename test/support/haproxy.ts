import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { acceptsConnections, endProcess, freePort } from './process.js';
import { requireProgram } from './services.js';
import { until } from './until.js';

/** The load balancer's config as shipped (compose.yaml mounts the same file). */
export const haproxyConfig = fileURLToPath(new URL('../../deploy/haproxy/haproxy.cfg', import.meta.url));

/** A replica behind HAProxy: its public address (`host:port`) and the admin port its /ready is asked on. */
export interface Backend {
  readonly address: string;
  readonly adminPort: number;
}

/** One line of HAProxy's log for a request that did not go normally (`option dontlog-normal`). */
export interface LoggedRequest {
  /** The replica it went to last (`gateway-2`), `<NOSRV>` for none. */
  readonly server: string;
  readonly status: number;
  /** The termination state (`SH--`: the server aborted before its headers), `----` for a request that ended well. */
  readonly termination: string;
  /** Connection retries, and whether the last one went to another replica (`+`). */
  readonly retries: number;
  readonly redispatched: boolean;
}

export type ServerState = 'UP' | 'DOWN';

/** `haproxy -f deploy/haproxy/haproxy.cfg -db` on a free loopback port, in front of three replicas. */
export interface HaproxyProcess {
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** What HAProxy last said of the replica `gateway-N` (N from 1): every one is UP until its checks say otherwise. */
  state(server: string): ServerState;
  /** Resolves once HAProxy has said `server` is `state` (at once if that is the last it said). */
  waitFor(server: string, state: ServerState, limitMs?: number): Promise<void>;
  /**
   * Its log so far: requests that did not go normally (a 5xx, a connection retried). Not those it
   * ends by closing the client's connection unanswered (a replica dying under a request after the
   * first of a keep-alive connection): HAProxy logs nothing for them.
   */
  requests(): LoggedRequest[];
  /** Everything it wrote, for a failure's message. */
  output(): string;
  stop(): Promise<void>;
}

/**
 * `127.0.0.1:51234 [27/Nov/2026:00:16:14.965] public gateways/gateway-1 0/0/0/1/1 200 84 - - ---- 1/1/0/0/+1 0/0 "GET /
 * HTTP/1.1"`
 */
const requestLine =
  /^\S+ \[[^\]]+\] \S+ [^/\s]+\/(\S+) \S+ (-?\d+) \S+ \S+ \S+ (\S{4}) \d+\/\d+\/\d+\/\d+\/(\+?)(\d+) /;
const stateLine = /Server [^/\s]+\/(\S+) is (UP|DOWN)\b/;

/** `config`: another file, to compare settings (the fleet suite's FLEET_HAPROXY_CONFIG); the shipped one by default. */
export async function startHaproxy(backends: readonly Backend[], config = haproxyConfig): Promise<HaproxyProcess> {
  const port = await freePort();
  const env: Record<string, string> = { LISTEN: `127.0.0.1:${port}` };
  for (const [i, backend] of backends.entries()) {
    env[`GATEWAY_${i + 1}`] = backend.address;
    env[`GATEWAY_${i + 1}_ADMIN_PORT`] = String(backend.adminPort);
  }
  const child = spawn(requireProgram('haproxy'), ['-f', config, '-db'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(child, 'exit');
  const lines: string[] = [];
  const states = new Map<string, ServerState>();
  const requests: LoggedRequest[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      lines.push(line);
      const state = stateLine.exec(line);
      if (state) states.set(state[1]!, state[2] as ServerState);
      const request = requestLine.exec(line);
      if (request)
        requests.push({
          server: request[1]!,
          status: Number(request[2]),
          termination: request[3]!,
          redispatched: request[4] === '+',
          retries: Number(request[5]),
        });
    });
  }
  const output = () => lines.join('\n');
  const url = `http://127.0.0.1:${port}`;

  try {
    await Promise.race([
      until(() => acceptsConnections(url), 'HAProxy accepting connections', 10_000, 20),
      exited.then(([code]) => Promise.reject(new Error(`haproxy exited (${code}) before listening:\n${output()}`))),
    ]);
  } catch (error) {
    await endProcess(child);
    throw error;
  }

  return {
    url,
    state: (server) => states.get(server) ?? 'UP',
    async waitFor(server, state, limitMs = 30_000) {
      await until(() => (states.get(server) ?? 'UP') === state, `HAProxy seeing ${server} ${state}`, limitMs, 10);
    },
    requests: () => [...requests],
    output,
    // SIGTERM: a hard stop, at once (SIGUSR1 would wait for the connections left).
    stop: () => endProcess(child, 'SIGTERM'),
  };
}
