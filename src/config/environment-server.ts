import { z } from 'zod';
import { RESERVED_DESCRIPTORS } from './descriptors.js';
import { setting } from './places.js';
import { expecting, flag, integer, origins, text, variableDocs } from './values.js';

/*
 * The server in the environment: where it listens, compression, what browsers may do
 * (introspection, CORS, CSRF), how a process stops, its client connections and admin port, and
 * NODE_ENV.
 */

/** The gateway's own paths: a subgraph path may be none of them. */
const OWN_PATHS = ['/', '/graphql', '/graphiql', '/health', '/ready', '/metrics', '/status'];

/** A path to serve beside `/graphql`: absolute, of plain path characters, not one the gateway serves already. */
const servedPath = () => {
  const expected = `a path such as /subgraph (none of ${OWN_PATHS.join(', ')})`;
  return expecting(
    z
      .string()
      .regex(/^\/[\w\-.~/]*[\w\-.~]$/, { error: expected })
      .refine((path) => !OWN_PATHS.some((own) => path === own || path.startsWith(`${own}/`)), { error: expected }),
    expected,
  );
};

/** Where the server listens, and what it serves beside the GraphQL endpoint. */
export const listening = {
  PORT: setting('port', integer(0, 65_535).default(4000)).register(variableDocs, {
    description: 'port to listen on (0: any free port)',
  }),
  HOST: setting('host', text('a host name or address').default('127.0.0.1')).register(variableDocs, {
    description: 'address to listen on (`0.0.0.0` in a container)',
  }),
  SUBGRAPH_PATH: setting('subgraphPath', servedPath().optional()).register(variableDocs, {
    unset: 'unset: not served',
    description:
      'serve the Apollo Federation v2 subgraph schema (`schema.subgraph.graphql`: `_service`, `_entities`, Head keyed by `uuid`) on this path, e.g. `/subgraph`, through the same limits, caller limits and telemetry as `/graphql` (see [joining a supergraph](docs/clients.md#joining-a-supergraph))',
  }),
};

/** Which answers are compressed. */
export const compression = {
  COMPRESSION_MIN_BYTES: setting('compressionMinBytes', integer(0, 104_857_600).default(1_024)).register(variableDocs, {
    description:
      'responses smaller than this are sent uncompressed; larger ones as `Accept-Encoding` asks (brotli, gzip, deflate)',
  }),
};

/** What browsers may do: introspection and GraphiQL, cross-origin calls, CSRF. */
export const browsers = {
  INTROSPECTION: flag().optional().register(variableDocs, {
    unset: 'on, off when `NODE_ENV=production`',
    description: 'serve introspection, and GraphiQL, which needs it',
  }),
  CORS_ORIGINS: origins().optional().register(variableDocs, {
    unset: 'unset: same-origin only',
    description: 'origins allowed to call from browsers, or `*` for any',
  }),
  CSRF_PREVENTION: setting('csrfPrevention', flag().default(false)).register(variableDocs, {
    description:
      "`true`: a GET, or a POST with a form or `text/plain` content type, must carry a header a browser only sends cross-site after a CORS preflight (HTTP 403 otherwise). Turn it on when something in front makes a browser's ambient credentials (cookies, HTTP Basic, a client certificate) into the `Authorization` the gateway forwards; see [GET and CSRF](docs/clients.md#get-and-csrf)",
  }),
};

/** How a process stops, its client connections, its admin port and the status page there. */
export const connections = {
  SHUTDOWN_DELAY_MS: setting('shutdown.delayMs', integer(0, 600_000).default(5_000)).register(variableDocs, {
    description:
      'after SIGTERM, how long `/ready` answers 503 while both ports go on serving as before, so the load balancer stops sending before connections close (Kubernetes takes a pod out of its Service as it sends SIGTERM; HAProxy needs its check interval × `fall`); then the graceful stop. 5 s covers an endpoint update and a few probe periods; SIGINT, or a second signal, skips it (see [rollouts](docs/deploy.md#rollouts))',
  }),
  SHUTDOWN_GRACE_MS: setting('shutdown.graceMs', integer(0, 600_000).default(10_000)).register(variableDocs, {
    description:
      'then, how long in-flight requests may finish (the listeners closed, every answer with `Connection: close`); those still running are cut',
  }),
  HEADERS_TIMEOUT_MS: setting('connections.headersTimeoutMs', integer(100, 600_000).default(10_000)).register(
    variableDocs,
    {
      description:
        'a connection that has not sent a whole request head in this time is answered 408 and closed; at most `REQUEST_TIMEOUT_MS` (see [connections](docs/operations.md#connections))',
    },
  ),
  REQUEST_TIMEOUT_MS: setting('connections.requestTimeoutMs', integer(100, 3_600_000).default(30_000)).register(
    variableDocs,
    {
      description:
        "the same for a whole request, head and body (the answer's own time is bounded by `OPERATION_TIMEOUT_MS`)",
    },
  ),
  MAX_CONNECTIONS: integer(1, 10_000_000)
    .optional()
    .register(variableDocs, {
      unset: `the file-descriptor limit less \`UPSTREAM_CONNECTIONS\` (twice with the embedded upstream) and ${RESERVED_DESCRIPTORS}`,
      description:
        'client connections one process holds at once; one more is closed as it arrives and counted in `gateway_connections_dropped_total`',
    }),
  ADMIN_PORT: setting('connections.adminPort', integer(0, 65_535).optional()).register(variableDocs, {
    unset: 'unset: none',
    description:
      'a second port, on `HOST`, serving only `/health`, `/ready`, `/metrics` and the status page (`/status`), so probes are answered while the public port is full; 0: any free port',
  }),
  STATUS_PAGE: setting('statusPage.on', flag().default(true)).register(variableDocs, {
    description:
      'serve the status page at `/status` on `ADMIN_PORT`: health at a glance and charts of the last 15 minutes, sampled from the metrics every 5 s into process memory (only where the page is served: with `ADMIN_PORT`, or `STATUS_PAGE_PUBLIC`); `false`: no page, no sampling (see [status page](docs/operations.md#status-page))',
  }),
  STATUS_PAGE_PUBLIC: setting('statusPage.public', flag().default(false)).register(variableDocs, {
    description:
      'serve the status page on the public port too (it shows no token or address, but it shows the load and the faults to whoever can reach the port)',
  }),
};

/** NODE_ENV, and what `production` changes. */
export const nodeEnv = {
  NODE_ENV: expecting(z.string(), 'any text').optional().register(variableDocs, {
    unset: 'unset',
    description:
      '`production`: refuses to start without `UPSTREAM_URL`, hides field suggestions, introspection off by default',
  }),
};
