import { setting } from './places.js';
import { flag, integer, openRatio, ratio, text, upstreamUrl, variableDocs } from './values.js';

/*
 * The upstream in the environment: where it is, and what its calls go through (the connection
 * pool, the largest body taken, the fan-out, the route table, shared calls, the retry budget and
 * the circuit breakers). environment.ts composes these with the other concerns' variables.
 */

const mib = 1024 * 1024;

/** Where the upstream is; unset, main.ts starts the embedded reference upstream. */
export const upstreamAddress = {
  UPSTREAM_URL: setting('upstreamUrl', upstreamUrl().optional()).register(variableDocs, {
    unset: 'unset: embedded reference upstream',
    description: 'base URL of the REST API',
  }),
};

/** The connections to the upstream and its calls' traffic policies. */
export const upstreamTraffic = {
  UPSTREAM_CONNECTIONS: setting('upstreamConnections', integer(1, 10_000).default(100)).register(variableDocs, {
    description: 'keep-alive connections to the upstream (one pool per process)',
  }),
  UPSTREAM_KEEPALIVE_MS: setting('upstreamKeepAliveMs', integer(1, 600_000).default(4_000)).register(variableDocs, {
    description: "idle keep-alive of upstream connections; keep it below the upstream's own",
  }),
  UPSTREAM_MAX_RESPONSE_BYTES: setting(
    'upstreamMaxResponseBytes',
    integer(1_024, 1_073_741_824).default(5 * mib),
  ).register(variableDocs, {
    description: 'largest upstream body accepted; a larger one is `UPSTREAM_ERROR` on that field',
  }),
  UPSTREAM_FANOUT: setting('upstreamFanout', integer(1, 1_000).default(10)).register(variableDocs, {
    description: 'upstream calls one request may have in flight at once',
  }),
  UPSTREAM_ROUTES_FILE: text('a path to a JSON file').optional().register(variableDocs, {
    unset: 'unset: the default routes',
    description: 'JSON file overriding rows of the route table',
  }),
  UPSTREAM_DEDUPE: setting('resilience.dedupe', flag().default(true)).register(variableDocs, {
    description:
      'identical upstream GETs in flight at once for the same caller (token, hashed) share one call and its answer; `false`: every request sends its own',
  }),
  UPSTREAM_RETRY_BUDGET_RATIO: setting('resilience.retryBudget.ratio', ratio().default(0.2)).register(variableDocs, {
    description:
      "retries of upstream GETs allowed per call over the last 10 s, across all requests (with `UPSTREAM_RETRY_BUDGET_MIN_PER_SECOND`), so retries add at most this share to a failing upstream's load",
  }),
  UPSTREAM_RETRY_BUDGET_MIN_PER_SECOND: setting(
    'resilience.retryBudget.minPerSecond',
    integer(0, 100_000).default(10),
  ).register(variableDocs, { description: 'retries allowed per second whatever the traffic, on top of the ratio' }),
  CIRCUIT_BREAKER_FAILURE_RATIO: setting('resilience.breaker.failureRatio', openRatio().default(0.5)).register(
    variableDocs,
    {
      description:
        "share of a breaker's last `CIRCUIT_BREAKER_WINDOW` upstream attempts failing that opens it: an operation's breaker counts its route's faults (5xx, the call timing out once it had a connection), the host's failed connections (refused, reset, no route, no name); never a 4xx, a client gone, the operation deadline or a wait for one of the gateway's own connections (`OVERLOADED`, unsent). Its calls (every call, for the host's) then fail at once with `UPSTREAM_UNAVAILABLE`, nothing sent",
    },
  ),
  CIRCUIT_BREAKER_WINDOW: setting('resilience.breaker.window', integer(1, 100_000).default(20)).register(variableDocs, {
    description:
      "attempts a breaker's failure ratio is taken over, its operation's (or every one, for the host's): a count, not a time, so it opens as fast at any traffic",
  }),
  CIRCUIT_BREAKER_MIN_CALLS: setting('resilience.breaker.minimumCalls', integer(1, 100_000).default(10)).register(
    variableDocs,
    { description: 'attempts a breaker sees before it may open; at most `CIRCUIT_BREAKER_WINDOW`' },
  ),
  CIRCUIT_BREAKER_RESET_MS: setting('resilience.breaker.resetMs', integer(1, 3_600_000).default(5_000)).register(
    variableDocs,
    {
      description:
        'how long a breaker stays open before one probe call is let through (it closes on success); what `extensions.retryAfterMs` and `Retry-After` count down',
    },
  ),
};
