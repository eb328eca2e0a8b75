import type { IncomingMessage, Server } from 'node:http';
import { Readable } from 'node:stream';
import { GraphQLError, type ExecutionArgs, type ExecutionResult, type GraphQLSchema } from 'graphql';
import { useServer, type Extra } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import { pathOf } from '../http/paths.js';
import { errorsJson, publicResult } from '../http/serialisation.js';
import { refusalErrors } from '../http/refusal.js';
import type { Incoming, OperationResult, RequestHeaders } from '../request-state.js';
import type { Serve } from '../pipeline/stages.js';

export interface WebSocketOptions {
  readonly schema: GraphQLSchema;
  /** The GraphQL endpoint's path: the only one upgraded. */
  readonly endpoint: string;
  /** Largest message a client may send (MAX_BODY_BYTES, as a POST's body). */
  readonly maxMessageBytes: number;
  /** How often a ping goes to each client (a dead one is closed when it misses a pong). */
  readonly heartbeatMs: number;
}

export interface WebSocketTransport {
  /** Takes the upgrades to the endpoint of `server`'s connections. */
  attach(server: Server): void;
  /** Closes every socket with 1001 (going away): the process stops, its clients reconnect to another replica. */
  close(): void;
}

/** The upgrade's headers a message does not carry: its credentials (only connection_init's token is the subscription's), what described the upgrade's own body, and the codings HTTP answers take (a message is not content-coded). */
const notCarried = new Set(['authorization', 'cookie', 'content-length', 'content-type', 'content-encoding', 'transfer-encoding', 'accept', 'accept-encoding']);

/** WebSocket's close code for a server going away. */
const GOING_AWAY = 1001;

/**
 * A subscription's headers: the upgrade request's (the client's address, its app's name, its
 * request id), with `connection_init`'s `Authorization` as the token, and an Accept that takes
 * every answer in parts (a result goes out as `next` messages, not in a media type).
 */
class SocketHeaders implements RequestHeaders {
  readonly #own: Map<string, string>;

  constructor(upgrade: IncomingMessage, authorization: string | undefined, bodyBytes: number) {
    this.#own = new Map();
    for (const [name, value] of Object.entries(upgrade.headers)) if (value !== undefined && !notCarried.has(name)) this.#own.set(name, Array.isArray(value) ? value.join(', ') : value);
    if (authorization !== undefined) this.#own.set('authorization', authorization);
    this.#own.set('content-type', 'application/json');
    this.#own.set('content-length', String(bodyBytes));
    this.#own.set('accept', 'text/event-stream');
  }

  get(name: string): string | null {
    return this.#own.get(name) ?? null;
  }

  has(name: string): boolean {
    return this.#own.has(name);
  }

  keys(): Iterable<string> {
    return this.#own.keys();
  }
}

/** `connection_init`'s token, as clients send it: `Authorization` (or `authorization`), at the top or under `headers`. */
function authorizationOf(payload: Readonly<Record<string, unknown>> | undefined): string | undefined {
  const headers = payload?.headers as Record<string, unknown> | undefined;
  const value = payload?.Authorization ?? payload?.authorization ?? headers?.Authorization ?? headers?.authorization;
  return typeof value === 'string' ? value : undefined;
}

/** One subscribe message as a request to the endpoint: its body the message's payload; the answer's results read by the transport. */
function socketIncoming(upgrade: IncomingMessage, endpoint: string, payload: unknown, authorization: string | undefined, signal: AbortSignal): Incoming {
  const body = Buffer.from(JSON.stringify(payload));
  return {
    method: 'POST',
    target: endpoint,
    headers: new SocketHeaders(upgrade, authorization, body.byteLength),
    signal,
    get gone() {
      return signal.aborted;
    },
    peer: upgrade.socket.remoteAddress,
    body: Readable.from([body]),
    takesResults: true,
  };
}

/** A result that ends before execution (no `data`): its errors are the subscribe message's `error`. */
const refusedBeforeExecution = (result: OperationResult): result is ExecutionResult => !(Symbol.asyncIterator in result) && !('data' in result);

/**
 * `result`'s stream, calling `done` once it ends, however it ends (its last part, the client's
 * complete, the socket closed). Not an async generator: its `return` would wait for the pending
 * `next`, which waits for an event that may never come.
 */
function until(result: AsyncIterable<ExecutionResult>, done: () => void): AsyncIterableIterator<ExecutionResult> {
  const parts = result[Symbol.asyncIterator]();
  const ended = <T>(step: IteratorResult<T>) => {
    if (step.done === true) done();
    return step;
  };
  const iterator: AsyncIterableIterator<ExecutionResult> = {
    [Symbol.asyncIterator]: () => iterator,
    next: () => parts.next().then(ended),
    return: () => Promise.resolve(parts.return?.() ?? { done: true as const, value: undefined }).finally(done),
  };
  return iterator;
}

/**
 * WebSocket (`graphql-transport-ws`, graphql-ws's server on ws) on the GraphQL path. Each subscribe
 * message is a request on the one path (`serve`): its payload the body, its token
 * `connection_init`'s `Authorization`, its caller the upgrade's address; its operation's result
 * (one, or a stream) goes out as `next` messages, a refusal before execution as `error`. A ping
 * every `heartbeatMs`.
 */
export function websocketTransport(serve: Serve, options: WebSocketOptions): WebSocketTransport {
  const servers: WebSocketServer[] = [];
  const served = new WeakMap<ExecutionArgs, OperationResult>();
  const run = (args: ExecutionArgs) => served.get(args)!;
  const graphqlWs = {
    schema: options.schema,
    execute: run,
    subscribe: run,
    // The one serialisation's shape (errors first, the server's extensions out); graphql-ws writes the JSON.
    onNext: (_ctx: unknown, _id: string, _payload: unknown, _args: ExecutionArgs, result: ExecutionResult) => publicResult(result),
    onError: (_ctx: unknown, _id: string, _payload: unknown, errors: readonly GraphQLError[]) => errorsJson(errors),
    async onSubscribe(ctx: { extra: Extra; connectionParams?: Readonly<Record<string, unknown>> | undefined }, _id: string, payload: unknown) {
      // A stream ends when its client completes it or leaves (graphql-ws ends the results' iteration); a query is not cut.
      const answer = await serve(socketIncoming(ctx.extra.request, options.endpoint, payload, authorizationOf(ctx.connectionParams), new AbortController().signal));
      const request = answer.request!;
      const operation = request.operations[0];
      const result = operation?.result;
      if (request.refusal !== undefined || operation === undefined || result === undefined || refusedBeforeExecution(result)) {
        answer.done();
        return request.refusal !== undefined || result === undefined ? refusalErrors(request.refusal) : ((result as ExecutionResult).errors ?? []);
      }
      const args = { schema: options.schema, document: operation.document!, operationName: operation.params.operationName ?? undefined, variableValues: operation.params.variables ?? undefined } as ExecutionArgs;
      served.set(args, Symbol.asyncIterator in result ? until(result, answer.done) : (answer.done(), result));
      return args;
    },
  };
  return {
    attach(server) {
      const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxMessageBytes });
      servers.push(wss);
      useServer(graphqlWs as never, wss, options.heartbeatMs);
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
