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
  /** COMPRESSION_MIN_BYTES: smaller responses (Content-Length, or a stream's first chunk) go out as they are. */
  readonly compressionMinBytes: number;
  readonly connections: ConnectionSettings;
}

/** Node checks the slow-request timeouts at least this often, whatever HEADERS_TIMEOUT_MS. */
const LONGEST_CHECK_INTERVAL_MS = 1_000;

/** Node's 408 for slow requests, checked each tenth of the head timeout (its 30 s default fired a 10 s one at 40 s). */
export function slowRequestOptions(
  connections: Pick<ConnectionSettings, 'headersTimeoutMs' | 'requestTimeoutMs'>,
): ServerOptions {
  return {
    headersTimeout: connections.headersTimeoutMs,
    requestTimeout: connections.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(LONGEST_CHECK_INTERVAL_MS, Math.ceil(connections.headersTimeoutMs / 10)),
  };
}

/** Closes connections over `max`; a cluster worker itself (Node's round via the primary cost it 40 % of a CPU). */
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

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

const streamed = /^(text\/event-stream|multipart\/mixed)\b/i;

/** Compressible types, never streams (a compressor each held 500 KB); SSE's `Content-Encoding: none` is dropped. */
function compressible(...[request, response]: Parameters<typeof compression.filter>): boolean {
  if (response.getHeader('content-encoding') === 'none') response.removeHeader('content-encoding');
  return !streamed.test(String(response.getHeader('content-type') ?? '')) && compression.filter(request, response);
}

/** The gateway on Node's server: compressed (brotli, quality 4: gzip's CPU, smaller), slow or extra connections cut. */
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
    // No Accept-Encoding: as it is, without the middleware (a cache may keep it for everyone: no Vary). One that
    // refuses every coding is the intake stage's 406, as it is.
    const coded = codingsFor(acceptEncoding);
    if (acceptEncoding === undefined || coded === 'none') return handler(request, response);
    return (coded === 'any' ? compress : compressAll)(request, response, () => handler(request, response));
  });
  // The descriptors over the cap stay for the upstream pool, Redis and files (config/descriptors.ts).
  capConnections(server, options.connections.maxConnections, metrics.watchConnections(server, 'public'));
  return server;
}

interface Drain {
  draining: boolean;
  /** Per connection, not per request: they are long-lived. */
  readonly sockets: Set<Socket>;
}

/** Answers under way on a connection (`assignSocket` to `detachSocket`), so the stop can tell them from a slow head. */
const answering = Symbol('http-server.answering');
type AnsweredSocket = Socket & { [answering]?: number };

const askedToClose = ({ headers: { connection } }: IncomingMessage): boolean =>
  connection !== undefined && connection !== 'keep-alive' && /(^|,)\s*close\s*(,|$)/i.test(connection);

/** writeHead's headers (an object, or a flat list) with `Connection: close` (streams say `keep-alive`: parts.ts). */
function closing(headers: unknown): unknown {
  const close = (name: unknown, value: unknown): unknown =>
    typeof name === 'string' && name.toLowerCase() === 'connection' ? 'close' : value;
  if (Array.isArray(headers))
    return headers.map((item: unknown, at) => (at % 2 === 1 ? close(headers[at - 1], item) : item));
  if (headers === null || typeof headers !== 'object') return headers;
  return Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, close(name, value)]));
}

/** Untracked (docs/performance.md#measured-reasons): `Connection: close` when draining or asked, as headers go out. */
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

const drains = new WeakMap<Server, Drain>();

/** Node's HTTP server, stopped by `stopGatewayServer`: the public port's and the admin port's. */
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

/** Node's diagnostics channel of every answer a server finished sending (`{ server, socket }`). */
const RESPONSE_FINISHED = 'http.server.response.finish';
const REQUEST_TIMEOUT = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';
/** How long after the stop a request head under way may take to arrive before it is answered 408. */
const HEAD_AFTER_STOP_MS = 1_000;

/** Stops gracefully: `Connection: close` from now on, idle connections closed, anything left cut after `graceMs`. */
export async function stopGatewayServer(server: Server, graceMs: number): Promise<void> {
  const drain = drains.get(server);
  if (drain !== undefined) drain.draining = true;
  const closed = new Promise((resolve) => server.close(resolve));
  server.closeIdleConnections();
  // A head under way gets a second, then 408 as Node's head timeout would: it stops with the server, and a trickled
  // head (or a client that keeps its end open) must not hold the stop.
  const cutHead = (socket: AnsweredSocket) => {
    if (!socket.destroyed && !(socket[answering]! > 0)) socket.end(REQUEST_TIMEOUT, () => socket.destroy());
  };
  const cutHeads = setTimeout(() => drain?.sockets.forEach(cutHead), Math.min(HEAD_AFTER_STOP_MS, graceMs));
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
