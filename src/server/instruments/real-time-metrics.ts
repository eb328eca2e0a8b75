import { Gauge, Histogram, type Registry } from 'prom-client';
import { MetricGroup } from './metric-group.js';

/** Where a subscription's stream goes out: GraphQL over SSE, Apollo's multipart, plain multipart, WebSocket. */
export type StreamTransport = 'sse' | 'multipart' | 'websocket';

/** Why the gateway ended a stream: the head deleted, the token refused, the process stopping, a client not reading. */
export type CutReason = 'deleted' | 'unauthenticated' | 'stopping' | 'stalled';

/** Real time (server/real-time/): subscriptions, changes published, events, delivery time, poll reads, streams cut. */
export class RealTimeMetrics extends MetricGroup {
  readonly #open = new Gauge({
    name: 'gateway_subscriptions_open',
    help: 'Subscriptions open in this process, by transport (sse, multipart, websocket).',
    labelNames: ['transport'] as const,
    registers: [this.registry],
  });
  /** SUBSCRIPTIONS_MAX, set once: what an alert compares gateway_subscriptions_open with. */
  readonly limit = new Gauge({
    name: 'gateway_subscriptions_max',
    help: 'Subscriptions this process may hold open at once (SUBSCRIPTIONS_MAX).',
    registers: [this.registry],
  });
  readonly published = this.counter(
    'gateway_head_changes_published_total',
    'Head changes this process published, by source: write (a mutation through it) or poll (found by reading the upstream).',
    ['source'],
  );
  readonly delivered = this.counter(
    'gateway_subscription_events_total',
    'Events sent to subscribers (each subscriber counted).',
  );
  readonly dropped = this.counter(
    'gateway_subscription_events_dropped_total',
    'Changes not sent as events, by reason: folded (a subscriber still had one waiting: it gets the latest) or unchanged (a polled change its subscriber sees no difference in).',
    ['reason'],
  );
  readonly delivery = new Histogram({
    name: 'gateway_subscription_delivery_seconds',
    help: 'From a change published (a write answered, a poll read) to each subscriber’s event resolved.',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly pollReads = this.counter(
    'gateway_poll_reads_total',
    'Reads of watched heads for changes made outside the gateway, by outcome (unchanged, changed, deleted, failed).',
    ['outcome'],
  );
  readonly streamsCut = this.counter(
    'gateway_streams_cut_total',
    'Subscription streams the gateway ended, by reason (deleted, unauthenticated, stopping, stalled).',
    ['reason'],
  );

  constructor(registry: Registry) {
    super(registry);
    for (const transport of ['sse', 'multipart', 'websocket'] as const) this.#open.set({ transport }, 0);
  }

  /** A stream opened on `transport`; the returned function closes it (once). */
  opened(transport: StreamTransport): () => void {
    this.#open.inc({ transport });
    let open = true;
    return () => {
      if (open) this.#open.dec({ transport });
      open = false;
    };
  }
}
