import { createServer } from 'node:http';
import { ConfigError, loadConfig, type Config } from './config.js';
import { createGateway } from './gateway.js';
import { createLogger } from './logger.js';
import { GatewayMetrics } from './metrics.js';
import { createReadiness, upstreamAnswers } from './readiness.js';
import { startReferenceUpstream, type ReferenceUpstream } from './reference-upstream/server.js';
import { DEMO_CREDENTIALS } from './reference-upstream/seed.js';
import { createUpstream } from './upstream/upstream.js';

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

async function main(): Promise<void> {
  const config = configOrExit();
  const logger = createLogger({ level: config.logLevel });
  const metrics = new GatewayMetrics();

  let reference: ReferenceUpstream | undefined;
  let upstreamUrl = config.upstreamUrl;
  if (upstreamUrl === undefined) {
    if (config.production) {
      process.stderr.write('Configuration error: UPSTREAM_URL: expected an http(s) URL ending in /v2 (the embedded reference upstream is not for production)\n');
      process.exit(1);
    }
    reference = await startReferenceUpstream({ routes: config.routes, record: false });
    upstreamUrl = reference.url;
    process.stdout.write(
      `No UPSTREAM_URL set: serving the embedded reference upstream at ${reference.url} (demo login: ${DEMO_CREDENTIALS.username} / ${DEMO_CREDENTIALS.password}).\n`,
    );
  }

  const upstream = createUpstream({
    baseUrl: upstreamUrl,
    routes: config.routes,
    timeoutMs: config.upstreamTimeoutMs,
    connections: config.upstreamConnections,
    keepAliveTimeoutMs: config.upstreamKeepAliveMs,
    maxResponseBytes: config.upstreamMaxResponseBytes,
    onAttempt: metrics.recordAttempt,
  });
  const ready = createReadiness({ check: upstreamAnswers(upstream) });
  const gateway = createGateway({ upstream, logger, settings: config, metrics, ready });
  const server = createServer(gateway);
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  process.stdout.write(`Gateway listening on http://${config.host}:${port}/graphql\n`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeIdleConnections();
    const grace = setTimeout(() => server.closeAllConnections(), config.shutdownGraceMs);
    await closed;
    clearTimeout(grace);
    await upstream.close();
    await reference?.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

await main();
