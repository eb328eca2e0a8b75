import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Where a subscription's stream goes out: GraphQL over SSE, Apollo's multipart, plain multipart, WebSocket. */
export type StreamTransport = 'sse' | 'multipart' | 'websocket';

/**
 * Why a stream ended before its client ended it: the head deleted, the token refused, the process stopping, a client
 * that read nothing.
 */
export type CutReason = 'deleted' | 'unauthenticated' | 'stopping' | 'stalled';

/** Seconds from a change's publication to a subscriber's event. */
const deliveryBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5];

/**
 * Real time (server/real-time/): open subscriptions by transport, changes published by where they
 * came from, events delivered and dropped, the delivery time, poll reads and streams cut, by reason.
 */
export class RealTimeMetrics {
  readonly #open: Gauge<'transport'>;
  readonly published: Counter<'source'>;
  readonly delivered: Counter;
  readonly dropped: Counter<'reason'>;
  readonly delivery: Histogram;
  readonly pollReads: Counter<'outcome'>;
  readonly streamsCut: Counter<'reason'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.#open = new Gauge({
      name: 'gateway_subscriptions_open',
      help: 'Subscriptions open in this process, by transport (sse, multipart, websocket).',
      labelNames: ['transport'] as const,
      registers,
    });
    this.published = new Counter({
      name: 'gateway_head_changes_published_total',
      help: 'Head changes this process published, by source: write (a mutation through it) or poll (found by reading the upstream).',
      labelNames: ['source'] as const,
      registers,
    });
    this.delivered = new Counter({
      name: 'gateway_subscription_events_total',
      help: 'Events sent to subscribers (each subscriber counted).',
      registers,
    });
    this.dropped = new Counter({
      name: 'gateway_subscription_events_dropped_total',
      help: 'Changes not sent as events, by reason: folded (a subscriber still had one waiting: it gets the latest) or unchanged (a polled change its subscriber sees no difference in).',
      labelNames: ['reason'] as const,
      registers,
    });
    this.delivery = new Histogram({
      name: 'gateway_subscription_delivery_seconds',
      help: 'From a change published (a write answered, a poll read) to each subscriber’s event resolved.',
      buckets: deliveryBuckets,
      registers,
    });
    this.pollReads = new Counter({
      name: 'gateway_poll_reads_total',
      help: 'Reads of watched heads for changes made outside the gateway, by outcome (unchanged, changed, deleted, failed).',
      labelNames: ['outcome'] as const,
      registers,
    });
    this.streamsCut = new Counter({
      name: 'gateway_streams_cut_total',
      help: 'Subscription streams the gateway ended, by reason (deleted, unauthenticated, stopping, stalled).',
      labelNames: ['reason'] as const,
      registers,
    });
    for (const transport of ['sse', 'multipart', 'websocket'] as const) this.#open.set({ transport }, 0);
  }

  /** A stream opened on `transport`; the returned function closes it (once). */
  opened(transport: StreamTransport): () => void {
    this.#open.inc({ transport });
    let closed = false;
    return () => {
      if (closed) return;
      closed = true;
      this.#open.dec({ transport });
    };
  }
}
