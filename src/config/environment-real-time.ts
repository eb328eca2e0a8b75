import { setting } from './places.js';
import { integer, variableDocs } from './values.js';

/*
 * Real time in the environment: subscriptions and live queries (their limits per caller and per
 * process, how their events are resolved, polling, replay), WebSockets' limits and heartbeats.
 */

/** Subscriptions, live queries and the streams that carry them. */
export const realTime = {
  SUBSCRIPTIONS_PER_CALLER: setting('subscriptions.perCaller', integer(1, 100_000).default(100)).register(
    variableDocs,
    {
      description:
        'subscriptions one caller (its token once known to be real, else its address) may hold open in one process, over every transport; one more is refused `SUBSCRIPTION_LIMIT` (see [real time](docs/operations.md#real-time))',
    },
  ),
  SUBSCRIPTIONS_MAX: setting('subscriptions.max', integer(1, 1_000_000).default(20_000)).register(variableDocs, {
    description:
      'subscriptions one process holds open for every caller together; one more is refused `SUBSCRIPTION_LIMIT`',
  }),
  SUBSCRIPTION_WATCHED_HEADS_PER_CALLER: setting(
    'subscriptions.watchedPerCaller',
    integer(1, 1_000_000).default(2_000),
  ).register(variableDocs, {
    description:
      "heads one caller's subscriptions and live queries may watch together in one process (a subscription one, a live query the heads it read); one more is refused `SUBSCRIPTION_LIMIT` (a live query whose re-run reads more ends with it)",
  }),
  SUBSCRIPTION_WATCHED_HEADS_MAX: setting('subscriptions.watchedMax', integer(1, 10_000_000).default(200_000)).register(
    variableDocs,
    {
      description:
        'heads the subscriptions and live queries of one process may watch together; past half of it, no caller more than its fair share',
    },
  ),
  SUBSCRIPTION_EVENT_CONCURRENCY: setting('subscriptions.eventConcurrency', integer(1, 10_000).default(32)).register(
    variableDocs,
    {
      description:
        "events one process resolves at once (each a read of its subscribers' selection): a write's fan-out to many live queries waits its turn instead of taking the upstream pool",
    },
  ),
  SUBSCRIPTION_EVENT_CONCURRENCY_PER_CALLER: setting(
    'subscriptions.eventConcurrencyPerCaller',
    integer(1, 10_000).default(4),
  ).register(variableDocs, {
    description: "of those, one caller's at once: the others' events are resolved between them",
  }),
  SUBSCRIPTION_POLL_MS: setting('subscriptions.pollMs', integer(0, 3_600_000).default(5_000)).register(variableDocs, {
    description:
      'how often each head a subscription or live query watches is read for changes made outside the gateway: one read per head per interval for the whole fleet (a lease in Redis with `REDIS_URL`); 0: never (only writes through the gateway are seen)',
  }),
  SUBSCRIPTION_POLL_CONCURRENCY: setting('subscriptions.pollConcurrency', integer(1, 256).default(4)).register(
    variableDocs,
    { description: "polling's reads under way at once at most, per process: its share of the upstream pool" },
  ),
  SUBSCRIPTION_REPLAY_MS: setting('subscriptions.replayMs', integer(0, 3_600_000).default(60_000)).register(
    variableDocs,
    {
      description:
        'how long the changes of each head are kept (in Redis with `REDIS_URL`) for an SSE client that reconnects with `Last-Event-ID`: it is sent what it missed, from any replica; 0: none kept (a reconnecting client is sent the head as it is now)',
    },
  ),
  SUBSCRIPTION_LIVE_THROTTLE_MS: setting('subscriptions.liveThrottleMs', integer(0, 600_000).default(1_000)).register(
    variableDocs,
    {
      description:
        'a live query (`@live`) is sent again at most this often: the changes that come meanwhile are sent together, as the result after them',
    },
  ),
  WEBSOCKET_MAX_OPERATIONS: setting('websocket.maxOperations', integer(1, 100_000).default(100)).register(
    variableDocs,
    {
      description:
        'operations (subscriptions, queries) one WebSocket may have open at once; one more closes the socket with 4413 and a log line',
    },
  ),
  WEBSOCKET_MAX_MESSAGES_PER_SECOND: setting(
    'websocket.maxMessagesPerSecond',
    integer(1, 1_000_000).default(200),
  ).register(variableDocs, {
    description:
      'messages (pings included) one WebSocket may send a second; one more closes the socket with 1008 (policy violation) and a log line',
  }),
  SUBSCRIPTION_HEARTBEAT_MS: setting('subscriptions.heartbeatMs', integer(100, 10_000).default(8_000)).register(
    variableDocs,
    {
      description:
        'how often an idle stream gets a heartbeat (an SSE comment, an empty multipart part, a WebSocket ping): at most 10 s, so proxies keep idle streams',
    },
  ),
};
