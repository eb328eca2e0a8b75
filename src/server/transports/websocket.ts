import type { IncomingMessage, Server } from 'node:http';
import {
  CloseCode,
  GRAPHQL_TRANSPORT_WS_PROTOCOL,
  handleProtocols,
  type Message,
  MessageType,
  parseMessage,
  type SubscribePayload,
  stringifyMessage,
} from 'graphql-ws';
import type { Logger } from 'pino';
import { type WebSocket, WebSocketServer } from 'ws';
import type { CallerRules } from '../callers.js';
import { pathOf } from '../http/paths.js';
import type { Incoming, RequestHeaders } from '../incoming.js';
import type { OperationEntry } from '../real-time/event-resolutions.js';
import { NodeHeaders } from './node.js';
import { type OperationSocket, SocketOperation } from './socket-operation.js';

export interface WebSocketOptions {
  /** How an operation's caller is told (callers.ts): TRUST_PROXY, the tokens known to be real. */
  readonly callers: CallerRules;
  /** The GraphQL endpoint's path: the only one upgraded. */
  readonly endpoint: string;
  /** Largest message a client may send (MAX_BODY_BYTES, as a POST's body): a larger one closes the socket (1009). */
  readonly maxMessageBytes: number;
  /** How often a ping goes to each client (a dead one is closed when it misses a pong). */
  readonly heartbeatMs: number;
  /** WEBSOCKET_MAX_OPERATIONS: operations one socket may have open at once. */
  readonly maxOperations: number;
  /** WEBSOCKET_MAX_MESSAGES_PER_SECOND: messages one socket may send a second. */
  readonly maxMessagesPerSecond: number;
  /** Where a socket closed for a cap is said (warn). */
  readonly logger: Logger;
}

export interface WebSocketTransport {
  attach(server: Server): void;
  /** Closes every socket with 1001 (going away): the process stops, its clients reconnect to another replica. */
  close(): void;
}

const GOING_AWAY = 1001;
/** Over WEBSOCKET_MAX_MESSAGES_PER_SECOND: a policy violation (graphql-ws's client does not retry it). */
const TOO_MANY_MESSAGES = 1008;
/** A socket that opened more operations than WEBSOCKET_MAX_OPERATIONS (graphql-ws's client retries it, later). */
const TOO_MANY_OPERATIONS = 4413;
/** How long a socket may wait before `connection_init` (graphql-ws's default). */
const CONNECTION_INIT_WAIT_MS = 3_000;

/** Upgrade headers an operation does not take: credentials (only connection_init's token counts), the request id. */
const notCarried = new Set(['authorization', 'cookie', 'x-request-id']);

/** An operation's headers: the upgrade's (address, app, trace), `connection_init`'s `Authorization` as the token. */
function socketHeaders(upgrade: IncomingMessage, authorization: string | undefined): RequestHeaders {
  const own = Object.entries(upgrade.headers).filter(([name, value]) => value !== undefined && !notCarried.has(name));
  if (authorization !== undefined) own.push(['authorization', authorization]);
  return new NodeHeaders(Object.fromEntries(own));
}

/** `connection_init`'s token as clients send it: `Authorization` or `authorization`, at the top or under `headers`. */
function authorizationOf(payload: Readonly<Record<string, unknown>> | undefined): string | undefined {
  const headers = payload?.headers as Record<string, unknown> | undefined;
  const value = payload?.Authorization ?? payload?.authorization ?? headers?.Authorization ?? headers?.authorization;
  return typeof value === 'string' ? value : undefined;
}

/**
 * The server side of one socket (graphql-transport-ws through graphql-ws's `parseMessage` and `stringifyMessage`). Each
 * `subscribe` is an operation of its own, so a `complete` ends the one its id names then and a reused id names a new
 * one (graphql-ws's server files operations by id alone: `subscribe`, `complete`, `subscribe` in one write left the
 * first running). Over WEBSOCKET_MAX_OPERATIONS or WEBSOCKET_MAX_MESSAGES_PER_SECOND the socket is closed.
 */
class SocketConnection implements OperationSocket {
  /** Its operations the client may still complete, by id. */
  readonly #byId = new Map<string, SocketOperation>();
  /** Every operation not yet ended (one completed still finishing is here, no longer by its id). */
  readonly #open = new Set<SocketOperation>();
  #incoming: Omit<Incoming, 'signal' | 'gone'> | undefined;
  #windowStart = 0;
  #messages = 0;
  readonly #initWait: NodeJS.Timeout;

  constructor(
    private readonly socket: WebSocket,
    private readonly upgrade: IncomingMessage,
    private readonly entry: OperationEntry,
    private readonly options: WebSocketOptions,
  ) {
    this.#initWait = setTimeout(
      () =>
        this.#incoming === undefined &&
        socket.close(CloseCode.ConnectionInitialisationTimeout, 'Connection initialisation timeout'),
      CONNECTION_INIT_WAIT_MS,
    );
  }

  send(data: string): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(data);
  }

  ended(operation: SocketOperation): void {
    this.#open.delete(operation);
    if (this.#byId.get(operation.id) === operation) this.#byId.delete(operation.id);
  }

  closed(): void {
    clearTimeout(this.#initWait);
    for (const operation of this.#open) operation.cancel();
    this.#byId.clear();
  }

  message(data: string): void {
    const { maxMessagesPerSecond: max } = this.options;
    if (this.#overRate())
      return void this.#refuse(TOO_MANY_MESSAGES, 'messages', max, `Too many messages: at most ${max} a second`);
    let message: Message;
    try {
      message = parseMessage(data);
    } catch {
      return void this.socket.close(CloseCode.BadRequest, 'Invalid message received');
    }
    switch (message.type) {
      case MessageType.ConnectionInit:
        if (this.#incoming !== undefined)
          return void this.socket.close(CloseCode.TooManyInitialisationRequests, 'Too many initialisation requests');
        clearTimeout(this.#initWait);
        this.#incoming = {
          headers: socketHeaders(this.upgrade, authorizationOf(message.payload ?? undefined)),
          peer: this.upgrade.socket.remoteAddress,
        };
        this.send(stringifyMessage({ type: MessageType.ConnectionAck }));
        break;
      case MessageType.Ping:
        this.send(stringifyMessage({ type: MessageType.Pong, payload: message.payload ?? undefined }));
        break;
      case MessageType.Pong:
        break;
      case MessageType.Subscribe:
        this.#subscribe(message.id, message.payload);
        break;
      case MessageType.Complete:
        this.#byId.get(message.id)?.cancel();
        this.#byId.delete(message.id);
        break;
      default:
        this.socket.close(CloseCode.BadRequest, `Unexpected message of type ${message.type} received`);
    }
  }

  #subscribe(id: string, payload: SubscribePayload): void {
    const incoming = this.#incoming;
    const { maxOperations: max } = this.options;
    if (incoming === undefined) this.socket.close(CloseCode.Unauthorized, 'Unauthorized');
    else if (this.#byId.has(id))
      this.socket.close(CloseCode.SubscriberAlreadyExists, `Subscriber for ${id} already exists`);
    else if (this.#open.size >= max)
      this.#refuse(TOO_MANY_OPERATIONS, 'operations', max, `Too many operations: at most ${max} at once on one socket`);
    else {
      const operation = new SocketOperation(id, this);
      this.#byId.set(id, operation);
      this.#open.add(operation);
      void operation.run(this.entry, payload, incoming, this.options.callers);
    }
  }

  /** Whether this message is one more than the socket may send this second. */
  #overRate(): boolean {
    const now = performance.now();
    if (now - this.#windowStart >= 1_000) {
      this.#windowStart = now;
      this.#messages = 0;
    }
    return ++this.#messages > this.options.maxMessagesPerSecond;
  }

  #refuse(code: number, cap: 'messages' | 'operations', limit: number, reason: string): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    const address = this.upgrade.socket.remoteAddress;
    this.options.logger.warn({ cap, limit, address, code }, 'websocket closed: over a cap');
    this.socket.close(code, reason);
  }
}

/**
 * WebSocket (`graphql-transport-ws`) on the GraphQL path: each `subscribe` enters the one path at the document stage
 * (`entry`: no HTTP request made of it), its token `connection_init`'s, its caller the upgrade's address.
 */
export function websocketTransport(entry: OperationEntry, options: WebSocketOptions): WebSocketTransport {
  const servers: WebSocketServer[] = [];
  const connected = (socket: WebSocket, upgrade: IncomingMessage) => {
    if (socket.protocol !== GRAPHQL_TRANSPORT_WS_PROTOCOL)
      return void socket.close(CloseCode.SubprotocolNotAcceptable, 'Subprotocol not acceptable');
    const connection = new SocketConnection(socket, upgrade, entry, options);
    let alive = true;
    const heartbeat = setInterval(() => {
      if (!alive) return void socket.terminate();
      alive = false;
      socket.ping();
    }, options.heartbeatMs).unref();
    socket.on('pong', () => {
      alive = true;
    });
    socket.on('message', (data) => connection.message(String(data)));
    socket.once('error', () => socket.terminate());
    socket.once('close', () => {
      clearInterval(heartbeat);
      connection.closed();
    });
  };
  return {
    attach(server) {
      const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes, handleProtocols });
      servers.push(wss);
      wss.on('connection', connected);
      server.on('upgrade', (request: IncomingMessage, socket, head) => {
        if (pathOf(request.url ?? '/') !== options.endpoint) return void socket.destroy();
        wss.handleUpgrade(request, socket, head, (client: WebSocket) => wss.emit('connection', client, request));
      });
    },
    close() {
      for (const wss of servers) for (const client of wss.clients) client.close(GOING_AWAY, 'The gateway is stopping');
    },
  };
}
