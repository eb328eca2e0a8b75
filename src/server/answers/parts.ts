import { Readable } from 'node:stream';
import type { ExecutionResult } from 'graphql';
import { serialise } from '../http/serialisation.js';
import { eventIdOf } from '../request-state.js';

interface Framing {
  readonly headers: Readonly<Record<string, string>>;
  readonly start: string;
  /** `id`: the id of the change it answers (a subscription's), where the framing carries one. */
  part(json: string, id?: string): string;
  readonly end: string;
  readonly heartbeat: string;
  /** The end after a heartbeat, where `end` cannot follow one. @default end */
  readonly endAfterHeartbeat?: string;
}

const jsonPart = 'Content-Type: application/json; charset=utf-8';
/** On every stream: nginx in front passes parts as they come. */
const streaming = { connection: 'keep-alive', 'x-accel-buffering': 'no' };

/** multipart/mixed; a heartbeat is RFC 2046 padding, which `--` may not follow: the end after one is an empty part. */
const multipart: Framing = {
  headers: { 'content-type': 'multipart/mixed; boundary="-"', ...streaming },
  start: '\r\n---',
  part: (json) => `\r\n${jsonPart}\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}\r\n---`,
  end: '--\r\n',
  heartbeat: ' ',
  endAfterHeartbeat: `\r\n${jsonPart}\r\nContent-Length: 2\r\n\r\n{}\r\n-----\r\n`,
};

/** GraphQL over SSE. `Content-Encoding: none` keeps buffering compressors away (ours drops the mark). */
const eventStream: Framing = {
  headers: { 'content-type': 'text/event-stream', 'content-encoding': 'none', ...streaming },
  start: ':\n\n', // some browsers wait for a first byte; then a heartbeat, so proxies keep the stream
  part: (json, id) => `${id === undefined ? '' : `id: ${id}\n`}event: next\ndata: ${json}\n\n`,
  end: 'event: complete\ndata:\n\n',
  heartbeat: ':\n\n',
};

/** Apollo's multipart subscriptions (Apollo Router's protocol): `{"payload": …}` parts, `{}` as the heartbeat. */
const apolloSubscription: Framing = {
  headers: { 'content-type': 'multipart/mixed; boundary="graphql"; subscriptionSpec="1.0"', ...streaming },
  start: '\r\n--graphql',
  part: (json) => `\r\n${jsonPart}\r\n\r\n{"payload":${json}}\r\n--graphql`,
  end: '--\r\n',
  heartbeat: `\r\n${jsonPart}\r\n\r\n{}\r\n--graphql`,
};

/** Heartbeats in a row that find the client read nothing since the last (its buffer full): the stream is cut. */
const STALLED_HEARTBEATS = 3;

export const framings = {
  'multipart/mixed': multipart,
  'text/event-stream': eventStream,
  'apollo subscription': apolloSubscription,
} as const;

/** A subscription's event as framed: subscribers that share it (same token, document and variables) share the bytes. */
const framedEvents = new WeakMap<object, { readonly framing: Framing; readonly bytes: Buffer }>();

/** A part as framed: an event (it carries its id) serialised and framed once however many subscribers it goes to. */
function framedPart(value: ExecutionResult, framing: Framing): string | Buffer {
  const id = (value as { [eventIdOf]?: string })[eventIdOf];
  if (id === undefined) return framing.part(serialise(value));
  const known = framedEvents.get(value);
  if (known?.framing === framing) return known.bytes;
  const bytes = Buffer.from(framing.part(serialise(value), id));
  framedEvents.set(value, { framing, bytes });
  return bytes;
}

export interface StreamOptions {
  /** SUBSCRIPTION_HEARTBEAT_MS */
  readonly heartbeatMs: number;
  /** Told of each stream cut because its client read nothing for STALLED_HEARTBEATS heartbeats. */
  readonly onStalled?: (() => void) | undefined;
}

/** An answer in parts, pulled as the client reads; destroying it (client gone) ends the iterator and the operation. */
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
      const done = () => callback(error);
      Promise.resolve(iterator.return?.()).then(done, done);
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
