import { type ReferenceUpstream, startReferenceUpstream } from '../../src/reference-upstream/server.js';
import { type HaproxyProcess, startHaproxy } from '../support/haproxy.js';
import { endProcess, freePorts, fromBuild, type GatewayProcess, startGatewayProcess } from '../support/process.js';
import { gatewayDir } from './checkout.js';

/*
 * The fleet as an operator runs it, on this machine: three gateway processes (`node dist/main.js`
 * of a built checkout, on fixed loopback ports, so one restarts where it was), the reference
 * upstream (in this process, where its call counts can be read) and HAProxy in front, with the
 * shipped deploy/haproxy/haproxy.cfg. FLEET_GATEWAY_DIR names the checkout (default: this one,
 * built by the suite's global setup), so an older build runs the same scenarios;
 * FLEET_HAPROXY_CONFIG another HAProxy config, to compare settings (the figures file names it).
 */

const FLEET_SIZE = 3;

/** One replica: its fixed ports, and its process while it runs. */
export interface FleetGateway {
  /** HAProxy's name for it: `gateway-1` … */
  readonly name: string;
  readonly port: number;
  readonly adminPort: number;
  /** Its own /graphql, past HAProxy. */
  readonly endpoint: string;
  /** Its admin port's origin (`/ready`, `/metrics`). */
  readonly admin: string;
  readonly process: GatewayProcess | undefined;
  /** Starts it on its ports; resolves once it listens (HAProxy may not have seen it yet). */
  start(): Promise<void>;
  /** Sends `signal` and resolves with its exit code once it has exited (null: ended by the signal). */
  stop(signal: 'SIGTERM' | 'SIGKILL'): Promise<number | null>;
}

export interface Fleet {
  /** HAProxy's /graphql: what clients call. */
  readonly url: string;
  readonly haproxy: HaproxyProcess;
  readonly reference: ReferenceUpstream;
  readonly gateways: readonly FleetGateway[];
  /**
   * Stops a replica gracefully, waits until HAProxy has taken it out, starts it again and waits until HAProxy sends it
   * traffic.
   */
  restart(gateway: FleetGateway): Promise<{ exitCode: number | null }>;
  close(): Promise<void>;
}

function fleetGateway(index: number, port: number, adminPort: number, env: Record<string, string>): FleetGateway {
  let running: GatewayProcess | undefined;
  return {
    name: `gateway-${index + 1}`,
    port,
    adminPort,
    endpoint: `http://127.0.0.1:${port}/graphql`,
    admin: `http://127.0.0.1:${adminPort}`,
    get process() {
      return running;
    },
    async start() {
      running = await startGatewayProcess(
        { ...env, PORT: String(port), ADMIN_PORT: String(adminPort) },
        fromBuild(gatewayDir),
      );
    },
    async stop(signal) {
      const stopping = running;
      if (stopping === undefined) return null;
      await endProcess(stopping.child, signal);
      running = undefined;
      return stopping.exited;
    },
  };
}

/**
 * Starts the fleet with `env` on every gateway (over HOST, LOG_LEVEL, UPSTREAM_URL and the ports).
 * Whatever started is stopped again if a part fails to start.
 */
export async function startFleet(env: Record<string, string> = {}): Promise<Fleet> {
  const reference = await startReferenceUpstream({ record: false });
  const ports = await freePorts(FLEET_SIZE * 2);
  // Every proxy on loopback is trusted (HAProxy, and the tests that call a gateway directly):
  // callers are told apart by the address the tests name in X-Forwarded-For.
  const common = { HOST: '127.0.0.1', LOG_LEVEL: 'warn', UPSTREAM_URL: reference.url, TRUST_PROXY: 'loopback', ...env };
  const gateways = Array.from({ length: FLEET_SIZE }, (_, i) =>
    fleetGateway(i, ports[i * 2]!, ports[i * 2 + 1]!, common),
  );
  let haproxy: HaproxyProcess | undefined;

  const close = async () => {
    await haproxy?.stop();
    await Promise.all(gateways.map((gateway) => gateway.stop('SIGKILL')));
    await reference.close();
  };

  try {
    const started = await Promise.allSettled(gateways.map((gateway) => gateway.start()));
    for (const result of started) if (result.status === 'rejected') throw result.reason;
    haproxy = await startHaproxy(
      gateways.map((gateway) => ({ address: `127.0.0.1:${gateway.port}`, adminPort: gateway.adminPort })),
      process.env.FLEET_HAPROXY_CONFIG || undefined,
    );
  } catch (error) {
    await close();
    throw error;
  }
  const balancer = haproxy;

  return {
    url: `${balancer.url}/graphql`,
    haproxy: balancer,
    reference,
    gateways,
    async restart(gateway) {
      const exitCode = await gateway.stop('SIGTERM');
      // Out before it comes back: a process back within one check interval would never be seen going.
      await balancer.waitFor(gateway.name, 'DOWN');
      await gateway.start();
      await balancer.waitFor(gateway.name, 'UP');
      return { exitCode };
    },
    close,
  };
}

/**
 * The sum of every series of `name` in a gateway's /metrics (all labels; or one series, `name{label="…"}` as printed),
 * 0 when it has none.
 */
export async function metricTotal(gateway: FleetGateway, name: string): Promise<number> {
  const text = await (await fetch(`${gateway.admin}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`))
      total += Number(line.slice(line.lastIndexOf(' ') + 1));
  return total;
}
