import { setting } from './places.js';
import { integer, proxyTrust, variableDocs } from './values.js';

/*
 * Callers in the environment: the per-caller and per-address rate limits, the login limits, the
 * tokens known to be real, which proxies name a client's address, and load shedding (when a
 * process is overloaded, and whose operations it refuses first).
 */

const off = 'unset: off';

/** Rate limits, login limits and how a caller is known. */
export const callerLimits = {
  // Per-caller limits: all off unless set (rate-limiter-flexible, server/traffic/caller-limits.ts).
  RATE_LIMIT_REQUESTS_PER_SECOND: setting('callerLimits.requestsPerSecond', integer(1, 1_000_000).optional()).register(
    variableDocs,
    {
      unset: off,
      description:
        "operations per caller per second, a burst of `RATE_LIMIT_WINDOW_SECONDS` seconds' worth (see [per-caller limits](docs/operations.md#per-caller-limits))",
    },
  ),
  RATE_LIMIT_UPSTREAM_CALLS_PER_SECOND: setting(
    'callerLimits.upstreamCallsPerSecond',
    integer(1, 10_000_000).optional(),
  ).register(variableDocs, {
    unset: off,
    description:
      "upstream calls per caller per second, charged with the operation's plan before execution, a burst of `RATE_LIMIT_WINDOW_SECONDS` seconds' worth, which must hold `UPSTREAM_CALL_BUDGET` (one operation's calls)",
  }),
  RATE_LIMIT_IN_FLIGHT: setting('callerLimits.inFlight', integer(1, 100_000).optional()).register(variableDocs, {
    unset: off,
    description:
      'operations one caller may have in flight at once (an `@defer`/`@stream` one until its last part is sent)',
  }),
  RATE_LIMIT_ADDRESS_REQUESTS_PER_SECOND: setting(
    'callerLimits.addressRequestsPerSecond',
    integer(1, 1_000_000).optional(),
  ).register(variableDocs, {
    unset: off,
    description:
      "operations per client address per second, without a token or with one not known to be real (see `KNOWN_TOKENS_TTL_MS`), a burst of `RATE_LIMIT_WINDOW_SECONDS` seconds' worth (see [when to turn it on](docs/operations.md#per-address-limit))",
  }),
  RATE_LIMIT_WINDOW_SECONDS: setting('callerLimits.windowSeconds', integer(1, 3_600).default(2)).register(
    variableDocs,
    {
      description:
        "the window of the per-second limits above: a caller (or address) may spend this many seconds' worth at once, and the rate on average; `RateLimit-Policy` says it as `w`",
    },
  ),
  RATE_LIMIT_LOGINS_PER_MINUTE: setting('logins.perAccountPerMinute', integer(1, 1_000_000).default(10)).register(
    variableDocs,
    {
      description:
        'logins of one account (by a hash of its user name) a minute, through the gateway\'s `login`; one more is refused `RATE_LIMITED` (`limit: "logins"`) with no upstream call',
    },
  ),
  RATE_LIMIT_ADDRESS_LOGINS_PER_MINUTE: setting(
    'logins.perAddressPerMinute',
    integer(1, 1_000_000).default(60),
  ).register(variableDocs, { description: 'logins from one client address a minute, whatever the accounts' }),
  KNOWN_TOKENS_TTL_MS: setting('knownTokens.ttlMs', integer(1_000, 86_400_000).default(3_600_000)).register(
    variableDocs,
    {
      description:
        "how long a token is remembered as real (by its hash) once the upstream accepted it (a 2xx to Get Permissions or Delete Head, the operations the contract says check a token) or the gateway's `login` issued it: from then on a caller of its own for fair shedding and every per-caller limit, and not bound by the per-address limit; before, it is its address's (see [callers](docs/operations.md#callers))",
    },
  ),
  KNOWN_TOKENS_MAX: setting('knownTokens.max', integer(1, 10_000_000).default(100_000)).register(variableDocs, {
    description:
      'tokens remembered as real at most per process (the least recently seen forgotten first; with `REDIS_URL` each learnt one is told to every replica): some 200 bytes each',
  }),
  TRUST_PROXY: setting('callerLimits.trustProxy', proxyTrust().default(false)).register(variableDocs, {
    description:
      "which proxies in front may name the client address in `X-Forwarded-For` (as Express's `trust proxy`): the nearest N (`1` behind one load balancer), those at these addresses or subnets (`10.0.0.0/8,loopback`), or every hop (`true`: the leftmost, which a client can write itself unless the proxy overwrites the header); the client is the nearest hop not trusted. It is the address of a caller without a token known to be real (see [callers](docs/operations.md#callers))",
  }),
};

/** When a process refuses new operations as overloaded. */
export const loadShedding = {
  // Load shedding (server/traffic/load-shedder.ts): on by default, each threshold off at 0.
  SHED_MAX_IN_FLIGHT: integer(0, 1_000_000).optional().register(variableDocs, {
    unset: '`UPSTREAM_CONNECTIONS`',
    description:
      "operations one process may have in flight (sent whole, answer not yet out; an `@defer`/`@stream` one until its last part; a request still sending its body holds none); past it a new one is refused at once with 503 `OVERLOADED` when it holds its fair share or more (its token's, once known to be real, else its address's), and whoever sends it at twice the cap; 0: no cap (see [load shedding](docs/operations.md#load-shedding))",
  }),
  SHED_EVENT_LOOP_DELAY_MS: setting('loadShedding.eventLoopDelayMs', integer(0, 60_000).default(250)).register(
    variableDocs,
    {
      description:
        "the event loop's delay (its median over the last 500 ms, less the 10 ms sampling interval) past which new operations are refused with 503 `OVERLOADED`, those of the callers holding their fair share or more; 0: not watched",
    },
  ),
  SHED_MAX_UPSTREAM_QUEUED: integer(0, 1_000_000).optional().register(variableDocs, {
    unset: '`UPSTREAM_FANOUT`',
    description:
      'upstream calls waiting for a connection of the pool (every one of `UPSTREAM_CONNECTIONS` busy) at which the gateway is overloaded as at `SHED_MAX_IN_FLIGHT`: what notices operations that each make many calls at once; 0: not watched',
  }),
  SHED_RETRY_AFTER_SECONDS: setting('loadShedding.retryAfterSeconds', integer(1, 3_600).default(1)).register(
    variableDocs,
    { description: 'the `Retry-After` of an `OVERLOADED` refusal' },
  ),
};
