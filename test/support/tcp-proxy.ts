import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy on a free loopback port whose link can be cut: a network cut between a client and a server that keeps its
 * data.
 */
export interface TcpProxy {
  readonly port: number;
  /** Drops every connection through it, and each new one as it comes, until `heal`. */
  cut(): void;
  /**
   * New connections go to `port` from now on (a name that fails over to another node); those open stay where they are.
   */
  retarget(port: number): void;
  heal(): void;
  close(): Promise<void>;
}

/** `delayMs`: each chunk is passed on this much later, either way (a slow link; order kept). */
export async function startTcpProxy(first: { host: string; port: number }, { delayMs = 0 } = {}): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let cut = false;
  let target = first;
  const server = createServer((client) => {
    if (cut) return client.destroy();
    const upstream = connect(target);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      open.add(from);
      if (delayMs === 0) from.pipe(to);
      else from.on('data', (chunk) => setTimeout(() => to.write(chunk), delayMs));
      from.on('error', () => to.destroy());
      from.once('close', () => {
        open.delete(from);
        setTimeout(() => to.destroy(), delayMs);
      });
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as { port: number }).port,
    cut() {
      cut = true;
      for (const socket of open) socket.destroy();
    },
    heal() {
      cut = false;
    },
    retarget(port) {
      target = { ...target, port };
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
