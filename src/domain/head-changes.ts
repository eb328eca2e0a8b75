/**
 * A change to one head, as the gateway learns of it: a write through any replica, or a read of
 * the upstream that found the head changed or gone. It names the head and never carries its data:
 * each watcher reads the head with its own token.
 */
export interface HeadChange {
  /** The head's UUID. */
  readonly id: string;
  /** When it was published (ms since 1970, the publisher's clock): what a subscriber's delivery time counts from. */
  readonly at: number;
  /**
   * Its place in the order of its head's changes, `<ms>-<sequence>` (the change log's: Redis's
   * stream id with REDIS_URL, one clock for the fleet): its SSE event's `id`, what a reconnecting
   * client names in `Last-Event-ID`.
   */
  readonly eventId: string;
  /** The head is gone (a deletion answered 2xx, or a read answered 404): a watcher's stream ends after this change. */
  readonly deleted?: true | undefined;
  /** Found by polling the upstream (a change made outside the gateway), not told by a write through it. */
  readonly polled?: true | undefined;
  /** The span of the write that made it (W3C trace context ids): each resolution's span links to it. */
  readonly cause?: { readonly traceId: string; readonly spanId: string; readonly traceFlags: number } | undefined;
}
