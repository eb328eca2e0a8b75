import { Readable } from 'node:stream';
import type { ExecutionResult } from 'graphql';
import { serialise } from '../http/serialisation.js';
import { eventIdOf } from '../request-state.js';

/** How one media type frames the parts of an answer (GraphQL over HTTP's incremental delivery). */
interface Framing {
  readonly headers: Readonly<Record<string, string>>;
  readonly start: string;
  /** A part; `id`: the id of the change it answers (a subscription's), where the framing carries one. */
  part(json: string, id?: string): string;
  readonly end: string;
  /** A keep-alive written while no part comes. */
  readonly heartbeat: string;
  /** The end after a heartbeat, where the heartbeat leaves the body somewhere `end` cannot follow. @default end */
  readonly endAfterHeartbeat?: string;
}

/** A part's head, as multipart/mixed writes it. */
const jsonPart = 'Content-Type: application/json; charset=utf-8';

/**
 * multipart/mixed with the boundary `-`, as yoga, Apollo and Relay's clients read it. Its
 * heartbeat is a space after the boundary (RFC 2046's transport padding, which every parser
 * passes over: urql reads the part after it, Apollo Client a head line without a colon); the end
 * after one is a last empty part `{}` (what Apollo Client skips, and urql merges as nothing) and
 * then the close delimiter, since `--` may not follow the padding.
 */
const multipart: Framing = {
  headers: { 'content-type': 'multipart/mixed; boundary="-"', connection: 'keep-alive', 'x-accel-buffering': 'no' },
  start: '\r\n---',
  part: (json) => `\r\n${jsonPart}\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}\r\n---`,
  end: '--\r\n',
  heartbeat: ' ',
  endAfterHeartbeat: `\r\n${jsonPart}\r\nContent-Length: 2\r\n\r\n{}\r\n-----\r\n`,
};

/**
 * Server-sent events, GraphQL over SSE's distinct connections mode: `next` events, then
 * `complete`. It starts with a comment (some browsers wait for a first byte before handing the
 * stream over) and writes one every SUBSCRIPTION_HEARTBEAT_MS while nothing else goes out, so proxies keep an idle
 * stream. `Content-Encoding: none` keeps buffering compressors away (the HTTP server's flushes every
 * write and drops the mark). Every stream says `X-Accel-Buffering: no`: nginx in front passes its parts as they come.
 */
const eventStream: Framing = {
  headers: {
    'content-type': 'text/event-stream',
    connection: 'keep-alive',
    'content-encoding': 'none',
    'x-accel-buffering': 'no',
  },
  start: ':\n\n',
  part: (json, id) => `${id === undefined ? '' : `id: ${id}\n`}event: next\ndata: ${json}\n\n`,
  end: 'event: complete\ndata:\n\n',
  heartbeat: ':\n\n',
};

/**
 * Apollo's multipart subscriptions (Apollo Client, Kotlin and iOS; Apollo Router's protocol): the
 * boundary `graphql`, each result as `{"payload": …}`, and an empty part `{}` as the heartbeat.
 */
const apolloSubscription: Framing = {
  headers: {
    'content-type': 'multipart/mixed; boundary="graphql"; subscriptionSpec="1.0"',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  },
  start: '\r\n--graphql',
  part: (json) => `\r\n${jsonPart}\r\n\r\n{"payload":${json}}\r\n--graphql`,
  end: '--\r\n',
  heartbeat: `\r\n${jsonPart}\r\n\r\n{}\r\n--graphql`,
};

/**
 * Heartbeats in a row that find the client has read nothing since the last (its buffer still full): the stream is cut.
 */
const STALLED_HEARTBEATS = 3;

export const framings = {
  'multipart/mixed': multipart,
  'text/event-stream': eventStream,
  'apollo subscription': apolloSubscription,
} as const;

/**
 * A subscription's event as framed, per object: subscribers that share it (the same token, document and variables)
 * share the bytes.
 */
const framedEvents = new WeakMap<object, { readonly framing: Framing; readonly bytes: Buffer }>();

/**
 * A part as its framing writes it: an event (it carries its id) serialised and framed once however many subscribers it
 * goes to.
 */
function framedPart(value: ExecutionResult, framing: Framing): string | Buffer {
  const id = (value as { [eventIdOf]?: string })[eventIdOf];
  if (id === undefined) return framing.part(serialise(value));
  const known = framedEvents.get(value);
  if (known?.framing === framing) return known.bytes;
  const bytes = Buffer.from(framing.part(serialise(value), id));
  framedEvents.set(value, { framing, bytes });
  return bytes;
}

/**
 * The body of an answer in parts: each result of `parts` serialised (http/serialisation.ts) and
 * framed as it comes, asked for only as the client reads (what waits is bounded by the stream's
 * buffer; a subscription folds the changes it has not taken). Destroying the stream (its client
 * gone) ends the parts' iterator, which cancels what the operation still had to do. A client that
 * reads nothing for STALLED_HEARTBEATS heartbeats with its buffer full is cut (`onStalled`).
 */
export interface StreamOptions {
  /** SUBSCRIPTION_HEARTBEAT_MS: how often an idle stream with heartbeats says it is alive. */
  readonly heartbeatMs: number;
  /** Told of each stream cut because its client read nothing for STALLED_HEARTBEATS heartbeats. */
  readonly onStalled?: (() => void) | undefined;
}

export function partsBody(parts: AsyncIterable<ExecutionResult>, framing: Framing, stream: StreamOptions): Readable {
  const iterator = parts[Symbol.asyncIterator]();
  let heartbeat: NodeJS.Timeout | undefined;
  // One part asked for at a time: a heartbeat's push makes the stream ask again meanwhile.
  let pulling = false;
  // A heartbeat was written since the last part: the end may have to differ.
  let beaten = false;
  const body = new Readable({
    read() {
      if (pulling) return;
      pulling = true;
      iterator.next().then(
        ({ done, value }) => {
          pulling = false;
          if (body.destroyed) return;
          if (value != null) {
            beaten = false;
            body.push(framedPart(value, framing));
          }
          if (done) {
            clearInterval(heartbeat);
            body.push(beaten ? (framing.endAfterHeartbeat ?? framing.end) : framing.end);
            body.push(null);
          }
        },
        (error: unknown) => body.destroy(error as Error),
      );
    },
    destroy(error, callback) {
      clearInterval(heartbeat);
      Promise.resolve(iterator.return?.()).then(
        () => callback(error),
        () => callback(error),
      );
    },
  });
  body.push(framing.start);
  let stalled = 0;
  heartbeat = setInterval(() => {
    if (body.destroyed || body.readableEnded) return;
    stalled = body.readableLength >= body.readableHighWaterMark ? stalled + 1 : 0;
    if (stalled < STALLED_HEARTBEATS) {
      beaten = true;
      return void body.push(framing.heartbeat);
    }
    stream.onStalled?.();
    body.destroy();
  }, stream.heartbeatMs).unref();
  return body;
}
