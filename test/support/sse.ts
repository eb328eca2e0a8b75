import { type Client, createClient } from 'graphql-sse';
/*
 * A GraphQL over SSE client by hand, as a browser's EventSource behaves: its events parsed as they
 * come (with their ids), and, when resuming, a new request with `Last-Event-ID` each time a
 * stream ends or fails (the gateway completing it as it stops, a replica gone).
 */

export interface SseEvent {
  readonly id: string | undefined;
  readonly event: string;
  readonly data: string;
}

/** Parses the events of an SSE body as its chunks come. */
function eventParser(onEvent: (event: SseEvent) => void): (chunk: string) => void {
  let text = '';
  return (chunk) => {
    text += chunk;
    for (let end = text.indexOf('\n\n'); end !== -1; end = text.indexOf('\n\n')) {
      const block = text.slice(0, end);
      text = text.slice(end + 2);
      const field = (name: string) => new RegExp(`^${name}: ?(.*)$`, 'm').exec(block)?.[1];
      const event = field('event');
      if (event !== undefined) onEvent({ id: field('id'), event, data: field('data') ?? '' });
    }
  };
}

export interface SseSubscription {
  /** Every event of every stream, in order (`next` and `complete`). */
  readonly events: SseEvent[];
  /** The requests made: 1, plus one per reconnection. */
  readonly connections: number;
  /** Whether a stream's first bytes came (the gateway writes its start once the subscription listens). */
  readonly opened: boolean;
  /** The `Last-Event-ID` it would reconnect with. */
  readonly lastEventId: string | undefined;
  close(): void;
}

export interface SseOptions {
  readonly url: string;
  /** The document, as text or (a trusted document's) by its id. */
  readonly query?: string;
  readonly documentId?: string;
  readonly variables?: Record<string, unknown>;
  readonly headers?: Record<string, string>;
  /** Sent on the first request: a client that resumes a stream of before. */
  readonly lastEventId?: string;
  /** Reconnect (with Last-Event-ID) whenever a stream ends, until closed. */
  readonly resume?: boolean;
}

export function subscribeSse(options: SseOptions): SseSubscription {
  const controller = new AbortController();
  const events: SseEvent[] = [];
  let connections = 0;
  let opened = false;
  let lastEventId = options.lastEventId;
  const onEvent = (event: SseEvent) => {
    events.push(event);
    if (event.id !== undefined) lastEventId = event.id;
  };
  const once = async () => {
    connections++;
    const response = await fetch(options.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        ...options.headers,
        ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
      },
      body: JSON.stringify({ query: options.query, documentId: options.documentId, variables: options.variables }),
      signal: controller.signal,
    });
    const parse = eventParser(onEvent);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      opened = true;
      parse(decoder.decode(chunk.value, { stream: true }));
    }
  };
  void (async () => {
    do {
      await once().catch(() => undefined);
      if (options.resume === true && !controller.signal.aborted)
        await new Promise((resolve) => setTimeout(resolve, 50));
    } while (options.resume === true && !controller.signal.aborted);
  })();
  return {
    events,
    get connections() {
      return connections;
    },
    get opened() {
      return opened;
    },
    get lastEventId() {
      return lastEventId;
    },
    close: () => controller.abort(),
  };
}

/**
 * graphql-sse clients on a gateway's endpoint, as a test suite makes them (no retries: a test sees every failure),
 * disposed together once it ends.
 */
export function sseClients(endpoint: () => string): { readonly client: () => Client; dispose(): void } {
  const made: Client[] = [];
  return {
    client: () => {
      const client = createClient({ url: endpoint(), retryAttempts: 0 });
      made.push(client);
      return client;
    },
    dispose: () => {
      for (const client of made.splice(0)) client.dispose();
    },
  };
}
