import cluster from 'node:cluster';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import {
  createServer,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerOptions,
  ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { constants } from 'node:zlib';
import compression from 'compression';
import type { ConnectionSettings } from '../../config.js';
import type { GatewayMetrics } from '../instruments/metrics.js';
import { codingsFor } from './codings.js';

export interface HttpServerOptions {
  /** Responses smaller than this (Content-Length, or a stream's first chunk) go out as they are. */
  readonly compressionMinBytes: number;
  /** The timeouts of slow requests and the cap on open connections. */
  readonly connections: ConnectionSettings;
}

/** Node checks the slow-request timeouts at least this often, whatever HEADERS_TIMEOUT_MS. */
const LONGEST_CHECK_INTERVAL_MS = 1_000;

/**
 * Node's own timeouts for a request that arrives too slowly: the connection is answered 408 and
 * closed. Node checks them only every `connectionsCheckingInterval` (30 s by default, so a 10 s
 * head timeout would fire anywhere up to 40 s): the check runs every tenth of the head timeout,
 * at most every second. An idle keep-alive connection is not a request: Node's keepAliveTimeout
 * (5 s) closes it, as before.
 */
export function slowRequestOptions(
  connections: Pick<ConnectionSettings, 'headersTimeoutMs' | 'requestTimeoutMs'>,
): ServerOptions {
  return {
    headersTimeout: connections.headersTimeoutMs,
    requestTimeout: connections.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(LONGEST_CHECK_INTERVAL_MS, Math.ceil(connections.headersTimeoutMs / 10)),
  };
}

/**
 * Closes the connections over `max` as they arrive, counting each with `onDrop`. In one process
 * that is Node's `maxConnections`, which closes them before anything is made for them. Not in a
 * cluster worker: there Node hands such a connection back to the primary, which offers it to the
 * workers in turn until one takes it (4 connections over the cap kept the primary at 40 % of a
 * CPU, holding their descriptors). A worker takes them and closes them at once instead.
 */
export function capConnections(server: Server, max: number, onDrop: () => void): void {
  if (!cluster.isWorker) {
    server.maxConnections = max;
    server.on('drop', onDrop);
    return;
  }
  let open = 0;
  server.on('connection', (socket: Socket) => {
    if (open >= max) {
      socket.destroy();
      onDrop();
      return;
    }
    open++;
    socket.once('close', () => open--);
  });
}

/** The gateway as Node's request handler. */
type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** Answers that go out in parts as they come: an event stream, multipart/mixed. */
const streamed = /^(text\/event-stream|multipart\/mixed)\b/i;

/**
 * Which responses to compress: compressible types (JSON, HTML), never an answer in parts. A
 * stream (a subscription's, a live query's) may stay open for hours: a compressor per stream
 * held some 500 KB each (brotli's window and state, what a browser's `Accept-Encoding` asks
 * for), so 10,000 browsers would hold gigabytes for parts of a few hundred bytes each; every
 * stream goes out as it is. An event stream is marked `Content-Encoding: none` (answers/parts.ts)
 * to keep compressors that buffer in front away (nginx's gzip): the mark is not a registered
 * coding, so it is dropped here.
 */
function compressible(...[request, response]: Parameters<typeof compression.filter>): boolean {
  if (response.getHeader('content-encoding') === 'none') response.removeHeader('content-encoding');
  return !streamed.test(String(response.getHeader('content-type') ?? '')) && compression.filter(request, response);
}

/**
 * The gateway on Node's HTTP server. Responses are compressed by `compression` (Express's):
 * brotli, gzip or deflate as Accept-Encoding prefers (q-values honoured, brotli first on a tie),
 * `Vary: Accept-Encoding` on every compressible response, nothing below `compressionMinBytes`
 * (unless the request refuses `identity`), nothing already encoded, nothing for HEAD, nothing
 * streamed (`compressible`). A one-shot JSON answer is one write. Brotli runs at quality 4
 * (compression's default): close to gzip's CPU cost, smaller output. Slow requests are cut
 * (slowRequestOptions) and connections over `maxConnections` closed on arrival (capConnections),
 * counted in `metrics`. (Overload and callers refused a moment ago are refused by the gateway's
 * intake stage, before a byte of the body is read: Node discards it once the answer is out.)
 */
export function createGatewayServer(
  handler: Handler,
  options: HttpServerOptions,
  metrics: Pick<GatewayMetrics, 'watchConnections'>,
): Server {
  const compressor = (threshold: number) =>
    compression({
      threshold,
      flush: constants.Z_SYNC_FLUSH,
      brotli: { flush: constants.BROTLI_OPERATION_FLUSH },
      filter: compressible,
    }) as unknown as (request: IncomingMessage, response: ServerResponse, next: () => void) => void;
  const compress = compressor(options.compressionMinBytes);
  const compressAll = compressor(0);
  const server = createDrainableServer(slowRequestOptions(options.connections), (request, response) => {
    const acceptEncoding = request.headers['accept-encoding'];
    // A request that accepts no encoding is answered as it is, without the middleware: a cache may
    // keep that identity answer for everyone, so it needs no Vary. One that refuses every coding
    // is the intake stage's 406, answered as it is.
    const coded = codingsFor(acceptEncoding);
    if (acceptEncoding === undefined || coded === 'none') return handler(request, response);
    return (coded === 'any' ? compress : compressAll)(request, response, () => handler(request, response));
  });
  // The descriptors over the cap stay for the upstream pool, Redis and files (config/descriptors.ts).
  capConnections(server, options.connections.maxConnections, metrics.watchConnections(server, 'public'));
  return server;
}

/** A server's drain: whether it is stopping, and its connections with the answers under way on each. */
interface Drain {
  draining: boolean;
  /** Every open connection (per connection, not per request: they are long-lived). */
  readonly sockets: Set<Socket>;
}

/** Answers being written on a connection (a response holds its socket from `assignSocket` to `detachSocket`). */
const answering = Symbol('http-server.answering');
type AnsweredSocket = Socket & { [answering]?: number };

/** The request asked to close its connection after the answer (`Connection: close`). */
function askedToClose(request: IncomingMessage): boolean {
  const { connection } = request.headers;
  return (
    connection !== undefined &&
    connection !== 'keep-alive' &&
    connection.split(',').some((option) => option.trim().toLowerCase() === 'close')
  );
}

/**
 * Headers given to writeHead (an object, or names and values in one list), their `Connection`
 * made `close` (a streamed answer says `keep-alive`: answers/parts.ts).
 */
function closing(headers: unknown): unknown {
  const close = (name: unknown, value: unknown): unknown =>
    typeof name === 'string' && name.toLowerCase() === 'connection' ? 'close' : value;
  if (Array.isArray(headers))
    return headers.map((item: unknown, at) => (at % 2 === 1 ? close(headers[at - 1], item) : item));
  if (headers === null || typeof headers !== 'object') return headers;
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, close(name, value)]));
}

/**
 * Responses that say `Connection: close` once their server is draining, or when their request
 * asked for it (a multipart or event-stream answer says `keep-alive` otherwise, in
 * headers given or set): decided as their headers go out, so an answer in flight when the stop
 * began closes its connection after it, and no response is tracked (a long-lived set of them
 * costs every request a promotion: docs/performance.md#measured-reasons). Each also counts itself
 * on its socket while it holds it, so the stop can tell a connection with an answer under way
 * from one that has sent part of a request head and nothing else.
 */
function closingWhenDraining(state: Drain): typeof ServerResponse {
  return class extends ServerResponse {
    // `reason` may be the headers (writeHead's two-argument form); Node's own writeHead sorts that out.
    override writeHead(statusCode: number, reason?: unknown, headers?: unknown): this {
      if (state.draining || askedToClose(this.req)) {
        this.setHeader('connection', 'close');
        if (typeof reason === 'object') reason = closing(reason);
        else headers = closing(headers);
      }
      return super.writeHead(statusCode, reason as string, headers as OutgoingHttpHeaders);
    }

    override assignSocket(socket: AnsweredSocket): void {
      socket[answering] = (socket[answering] ?? 0) + 1;
      super.assignSocket(socket);
    }

    override detachSocket(socket: AnsweredSocket): void {
      socket[answering] = (socket[answering] ?? 1) - 1;
      super.detachSocket(socket);
    }
  } as typeof ServerResponse;
}

/** Each gateway server's drain, which its responses read as their headers go out. */
const drains = new WeakMap<Server, Drain>();

/** Node's HTTP server, made to be stopped by `stopGatewayServer`: the public port's and the admin port's. */
export function createDrainableServer(options: ServerOptions, handler: Handler): Server {
  const drain: Drain = { draining: false, sockets: new Set() };
  const server = createServer({ ...options, ServerResponse: closingWhenDraining(drain) }, handler);
  server.on('connection', (socket: Socket) => {
    drain.sockets.add(socket);
    socket.once('close', () => drain.sockets.delete(socket));
  });
  drains.set(server, drain);
  return server;
}

/** Node's diagnostics channel of every answer an HTTP server finished sending (`{ server, socket }`). */
const RESPONSE_FINISHED = 'http.server.response.finish';

/** What Node answers a request head that did not arrive in time. */
const REQUEST_TIMEOUT = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';

/** How long after the stop a request head under way may take to arrive before it is answered 408. */
const HEAD_AFTER_STOP_MS = 1_000;

/**
 * Stops a gateway server gracefully: no new connections; every answer from now on, those in
 * flight included, carries `Connection: close`, so a keep-alive client busy at the stop gets its
 * answer and then the connection ends (it used to be served new requests for the whole grace
 * period); an answer whose headers were already out (a stream) has its connection closed once it
 * is sent; idle connections close at once; a request head under way at the stop has a second to
 * arrive (and is then served, with `Connection: close`), after which its connection is answered
 * 408 and closed as Node's head timeout would (Node stops checking that timeout once the server
 * closes, so a trickled head would hold the stop for the whole grace); whatever is still open
 * after `graceMs` is cut.
 */
export async function stopGatewayServer(server: Server, graceMs: number): Promise<void> {
  const drain = drains.get(server);
  if (drain !== undefined) drain.draining = true;
  const closed = new Promise((resolve) => server.close(resolve));
  server.closeIdleConnections();
  // Node would answer 408 and destroy the socket (a client that keeps its end open must not hold the stop).
  const cutHeads = setTimeout(
    () => {
      for (const socket of drain?.sockets ?? [])
        if (!socket.destroyed && !((socket as AnsweredSocket)[answering]! > 0))
          socket.end(REQUEST_TIMEOUT, () => socket.destroy());
    },
    Math.min(HEAD_AFTER_STOP_MS, graceMs),
  );
  const closeAnswered = (message: unknown) => {
    const { server: from, socket } = message as { server: unknown; socket: Socket };
    if (from === server) socket.destroySoon();
  };
  subscribe(RESPONSE_FINISHED, closeAnswered);
  const grace = setTimeout(() => server.closeAllConnections(), graceMs);
  await closed;
  clearTimeout(cutHeads);
  clearTimeout(grace);
  unsubscribe(RESPONSE_FINISHED, closeAnswered);
}
