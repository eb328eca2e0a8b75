import cluster, { type Worker } from 'node:cluster';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout } from 'node:timers/promises';
import { type Config, ConfigError, loadConfig } from './config.js';
import type { ReferenceUpstream } from './reference-upstream/server.js';

function configOrExit(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // One line, no stack: an operator fixes the variable and starts again.
    process.stderr.write(`Configuration error: ${error.message}\n`);
    process.exit(1);
  }
}

/** Why the system refused a port, in the operator's terms; undefined for an error that is not about the port. */
const LISTEN_REFUSALS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'the port is in use (another process holds it, a gateway still draining?)',
  EACCES: 'not permitted (a port below 1024 needs privileges)',
  EADDRNOTAVAIL: 'no such address on this machine (HOST)',
};

/**
 * Listens, or exits 1 with one line (no stack) when the port cannot be had: an operator changes PORT, ADMIN_PORT or
 * HOST and starts again.
 */
async function listenOrExit(server: Server, port: number, host: string): Promise<void> {
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (error) {
    const refusal = LISTEN_REFUSALS[(error as NodeJS.ErrnoException).code ?? ''];
    if (refusal === undefined) throw error;
    process.stderr.write(`Cannot listen on ${host}:${port}: ${refusal}\n`);
    process.exit(1);
  }
}

/** Without UPSTREAM_URL (never in production) the gateway brings its own reference upstream. */
async function embeddedUpstream(config: Config): Promise<ReferenceUpstream | undefined> {
  if (config.upstreamUrl !== undefined) return undefined;
  if (config.production) {
    process.stderr.write(
      'Configuration error: UPSTREAM_URL: expected an http(s) URL ending in /v2 (the embedded reference upstream is not for production)\n',
    );
    process.exit(1);
  }
  const [{ startReferenceUpstream }, { DEMO_CREDENTIALS }] = await Promise.all([
    import('./reference-upstream/server.js'),
    import('./reference-upstream/seed.js'),
  ]);
  const reference = await startReferenceUpstream({ routes: config.routes, record: false });
  process.stdout.write(
    `No UPSTREAM_URL set: serving the embedded reference upstream at ${reference.url} (demo login: ${DEMO_CREDENTIALS.username} / ${DEMO_CREDENTIALS.password}).\n`,
  );
  return reference;
}

/**
 * One gateway process: the gateway on an HTTP server, stopped gracefully by `stop`. Its modules
 * load here, not at the top: a cluster primary only forks, and the whole graph (the pipeline, the schema,
 * undici, zod, prom-client) would cost it as much memory as a worker.
 */
async function serveGateway(
  config: Config,
  upstreamUrl: string,
): Promise<{ port: number; adminPort: number | undefined; stop: Stop }> {
  const [
    { buildGateway },
    { createGatewayServer, stopGatewayServer },
    { createLogger },
    { GatewayMetrics },
    { logExportFailures },
  ] = await Promise.all([
    import('./server/gateway.js'),
    import('./server/http/http-server.js'),
    import('./server/instruments/logger.js'),
    import('./server/instruments/metrics.js'),
    import('./telemetry/tracing.js'),
  ]);
  const logger = createLogger({ level: config.logLevel });
  const metrics = new GatewayMetrics({ clusterWorker: cluster.isWorker });
  // Shared limit counters and APQ registrations; the gateway serves without them (from process
  // memory) while Redis is unreachable, at start too: it waits for it two seconds at most.
  const connect = async (settings: NonNullable<typeof config.redis>) =>
    (await import('./server/shared-state/shared-redis.js')).connectSharedState(settings, logger, metrics);
  const redis = config.redis === undefined ? undefined : await connect(config.redis);
  // The response cache's own Redis (RESPONSE_CACHE_REDIS_URL), if it has one: its growth never takes the limits'
  // memory.
  const cacheRedis = config.responseCacheRedis === undefined ? undefined : await connect(config.responseCacheRedis);
  // Each process (each worker with WORKERS>1) exports its own spans.
  const {
    handler,
    websocket,
    shedder,
    headEvents,
    knownTokens,
    subscriptions,
    upstream,
    tracing,
    ready,
    notReadyBecause,
    leaveRotation,
    status,
  } = buildGateway(config, upstreamUrl, { logger, metrics, redis, cacheRedis, clusterWorker: cluster.isWorker });
  // The tokens the fleet knows to be real, before the first request is told its caller (a restart forgets none).
  await knownTokens.load();
  if (tracing.recording) logExportFailures(logger);
  const server = createGatewayServer(handler, config, metrics);
  websocket.attach(server);
  await listenOrExit(server, config.port, config.host);
  // Listens after the public port: a cluster primary takes a worker's first 'listening' for the public port.
  const { adminPort } = config.connections;
  let admin: Server | undefined;
  if (adminPort !== undefined) {
    admin = (await import('./server/probes/admin-server.js')).createAdminServer(
      { ready, notReadyBecause, metrics, status },
      config.connections,
    );
    await listenOrExit(admin, adminPort, config.host);
  }
  const { delayMs, graceMs } = config.shutdown;
  return {
    port: (server.address() as AddressInfo).port,
    adminPort: admin === undefined ? undefined : (admin.address() as AddressInfo).port,
    async stop(signal, hurried) {
      // Out of the load balancer's rotation first, serving as before until it has noticed.
      leaveRotation();
      const delay = signal === 'SIGTERM' ? delayMs : 0;
      logger.info({ signal, delayMs: delay, graceMs }, 'shutting down');
      if (delay > 0 && !hurried.aborted) await setTimeout(delay, undefined, { signal: hurried }).catch(() => undefined);
      // Every stream completed, its client reconnecting to a replica in rotation, before the drain.
      subscriptions.completeAll();
      websocket.close();
      await Promise.all([
        stopGatewayServer(server, graceMs),
        admin === undefined ? undefined : stopGatewayServer(admin, graceMs),
      ]);
      shedder.close();
      status?.close();
      headEvents.close();
      knownTokens.close();
      await upstream.close();
      await Promise.all([redis?.close(), cacheRedis?.close()]);
      // The last operations' spans are still in the batch.
      await tracing.shutdown();
    },
  };
}

/**
 * Stops the process's part on `signal`: SIGTERM (an orchestrator, a load balancer's rollout)
 * leaves the rotation and waits SHUTDOWN_DELAY_MS before draining; SIGINT (a person at a
 * terminal) drains at once. `hurried` aborts on a second signal: the wait is cut short.
 */
type Stop = (signal: NodeJS.Signals, hurried: AbortSignal) => Promise<void>;

function onStopSignal(stop: Stop): void {
  const hurry = new AbortController();
  let stopping = false;
  const begin = (signal: NodeJS.Signals) => {
    if (stopping) return false;
    stopping = true;
    void stop(signal, hurry.signal).then(() => process.exit(0));
    return true;
  };
  // The second signal this process gets, not the second stop it hears of: a worker is told by its
  // primary in a message, and a supervisor that signals the whole process group (systemd, a
  // terminal) gives it the signal too, in either order.
  let signals = 0;
  const handler = (signal: NodeJS.Signals) => {
    signals++;
    if (!begin(signal) && signals > 1) hurry.abort();
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  if (cluster.isWorker) {
    process.on('message', (message: unknown) => {
      if (!isStopMessage(message)) return;
      if (message.hurry) hurry.abort();
      else begin(message.gatewayStop);
    });
  }
}

/** What a cluster primary tells its workers: stop on `gatewayStop` as on that signal, or `hurry` (a second signal). */
interface StopMessage {
  readonly gatewayStop: NodeJS.Signals;
  readonly hurry?: boolean;
}

const isStopMessage = (message: unknown): message is StopMessage =>
  typeof message === 'object' && message !== null && 'gatewayStop' in message;

/** Tells a worker to stop (or to hurry); by its signal when the message cannot go (the channel closing). */
function tell(worker: Worker, message: StopMessage): void {
  if (worker.isDead()) return;
  try {
    worker.send(message);
  } catch {
    worker.process.kill(message.gatewayStop);
  }
}

/**
 * The line whoever starts the process waits for: the endpoint, and GraphiQL's address where it is
 * on (it goes where introspection goes, gateway.ts; `/graphiql` is pages/front-door.ts's).
 */
function listeningLine(config: Config, port: number): string {
  const origin = `http://${config.host}:${port}`;
  const workers = config.workers > 1 ? ` (${config.workers} workers)` : '';
  return `Gateway listening on ${origin}/graphql${workers}${config.introspection ? ` (GraphiQL: ${origin}/graphiql)` : ''}\n`;
}

/** Said before the "listening" line, which whoever starts the process waits for. */
function announceAdminPort(config: Config, port: number | undefined): void {
  if (port !== undefined)
    process.stdout.write(`Admin endpoints (/health, /ready, /metrics) on http://${config.host}:${port}\n`);
}

/** A worker's ports as it listens on them: the public one, then ADMIN_PORT's when set (serveGateway's order). */
function listeningPorts(worker: Worker, count: number): Promise<number[]> {
  return new Promise((resolve) => {
    const ports: number[] = [];
    const onListening = (address: AddressInfo) => {
      if (ports.push(address.port) < count) return;
      worker.off('listening', onListening);
      resolve(ports);
    };
    worker.on('listening', onListening);
  });
}

/** The exit code of the first worker to exit (before they all listen, a worker that could not start). */
const firstExit = (workers: readonly Worker[]) =>
  new Promise<number>((resolve) => {
    for (const worker of workers) worker.once('exit', (code: number | null) => resolve(code ?? 1));
  });

async function main(): Promise<void> {
  const config = configOrExit();

  // Stop handlers are in place before anyone learns the port: a signal sent as soon as the
  // "listening" line (or a worker's listening event) appears must find them, or it kills outright.
  if (cluster.isWorker) {
    const serving = serveGateway(config, config.upstreamUrl!);
    onStopSignal(async (signal, hurried) => (await serving).stop(signal, hurried));
    await serving;
    return;
  }

  const reference = await embeddedUpstream(config);
  const upstreamUrl = config.upstreamUrl ?? reference!.url;

  if (config.workers === 1) {
    const gateway = await serveGateway(config, upstreamUrl);
    onStopSignal(async (signal, hurried) => {
      await gateway.stop(signal, hurried);
      await reference?.close();
    });
    announceAdminPort(config, gateway.adminPort);
    process.stdout.write(listeningLine(config, gateway.port));
    return;
  }

  // Several workers share the port (node:cluster hands connections round); the primary only
  // forks them, relays the stop signal and head events, sums their metrics for /metrics, and owns
  // the embedded upstream if there is one.
  const [{ aggregateWorkerMetrics }, { relayWorkerEvents }] = await Promise.all([
    import('./server/instruments/cluster-metrics.js'),
    import('./server/shared-state/cluster-events.js'),
  ]);
  aggregateWorkerMetrics();
  // Without Redis, the workers' head events reach each other through here.
  relayWorkerEvents();
  const workers = Array.from({ length: config.workers }, () => cluster.fork({ UPSTREAM_URL: upstreamUrl }));
  // Each worker is handed the stop, and a second signal: each leaves the rotation and drains itself.
  onStopSignal(async (signal, hurried) => {
    const live = workers.filter((worker) => !worker.isDead());
    hurried.addEventListener(
      'abort',
      () => {
        for (const worker of live) tell(worker, { gatewayStop: signal, hurry: true });
      },
      { once: true },
    );
    await Promise.all(
      live.map(async (worker) => {
        const exited = once(worker, 'exit');
        tell(worker, { gatewayStop: signal });
        await exited;
      }),
    );
    await reference?.close();
  });
  // Every worker serves ADMIN_PORT too (the cluster shares it as it shares the public port): a
  // probe is answered by whichever worker the connection goes to, and /metrics sums them all.
  const listening = await Promise.race([
    Promise.all(workers.map((worker) => listeningPorts(worker, config.connections.adminPort === undefined ? 1 : 2))),
    firstExit(workers),
  ]);
  if (typeof listening === 'number') {
    // A worker that could not start (its port refused) said why and exited: the others go too.
    for (const worker of workers) if (!worker.isDead()) worker.process.kill('SIGKILL');
    await reference?.close();
    process.exit(listening === 0 ? 1 : listening);
  }
  const [port, adminPort] = listening[0]!;
  announceAdminPort(config, adminPort);
  process.stdout.write(listeningLine(config, port!));
}

await main();
