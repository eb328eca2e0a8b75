import { startReferenceUpstream } from './server.js';

/*
 * `npm run upstream`: the reference upstream as its own process, for benchmarks and for pointing
 * a gateway at it by UPSTREAM_URL. RECORD=0 turns request recording off (benchmarks); counting
 * per operation stays on and is readable at GET /__reference/stats.
 */

function portFromEnv(value: string | undefined): number {
  if (value === undefined || value === '') return 8080;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    process.stderr.write(`PORT: expected an integer from 0 to 65535, got ${JSON.stringify(value)}\n`);
    process.exit(1);
  }
  return port;
}

const upstream = await startReferenceUpstream({
  port: portFromEnv(process.env.PORT),
  host: process.env.HOST || '127.0.0.1',
  record: process.env.RECORD !== '0',
});
process.stdout.write(`Reference upstream listening on ${upstream.url}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  upstream.close().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`close failed: ${String(error)}\n`);
      process.exit(1);
    },
  );
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
