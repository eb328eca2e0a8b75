import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { pipeline, Readable } from 'node:stream';
import type { Incoming, RequestHeaders } from '../incoming.js';
import type { MaybePromise, Serve, Served } from '../pipeline/stages.js';

/** Node's request handler (what http/http-server.ts serves). */
export type Handler = (request: IncomingMessage, response: ServerResponse) => void;

/** Node's headers as every transport gives them (by lower-case name), a repeated one's values joined as fetch's are. */
export class NodeHeaders implements RequestHeaders {
  constructor(private readonly raw: IncomingHttpHeaders) {}

  get(name: string): string | null {
    const value = this.raw[name];
    return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
  }

  has(name: string): boolean {
    return this.raw[name] !== undefined;
  }

  keys(): Iterable<string> {
    return Object.keys(this.raw);
  }
}

/**
 * A Node request as the gateway's: its signal made when first asked for (an AbortController is a tenth of a kept
 * answer's CPU; an upstream call asks, a kept answer does not), aborted if its client hangs up before its answer's out.
 */
class NodeIncoming implements Incoming {
  readonly method: string;
  readonly target: string;
  readonly headers: NodeHeaders;
  readonly peer: string | undefined;
  readonly body: IncomingMessage;
  gone = false;
  #hangUp: AbortController | undefined;

  constructor(request: IncomingMessage, response: ServerResponse) {
    this.method = request.method ?? 'GET';
    this.target = request.url ?? '/';
    this.headers = new NodeHeaders(request.headers);
    this.peer = request.socket.remoteAddress;
    this.body = request;
    response.once('close', () => {
      if (response.writableFinished) return;
      this.gone = true;
      this.#hangUp?.abort();
    });
  }

  get signal(): AbortSignal {
    if (this.#hangUp === undefined) {
      this.#hangUp = new AbortController();
      if (this.gone) this.#hangUp.abort();
    }
    return this.#hangUp.signal;
  }
}

/** Writes an answer, `done` once out: at once if whole, else as its stream ends, its client goes or writing fails. */
function send(response: ServerResponse, { answer, done }: Served): void {
  const { body } = answer;
  try {
    // Names and values in one list: what Node writes without an object made of them.
    const headers: string[] = [];
    for (const [name, value] of answer.headers) headers.push(name, value);
    if (body instanceof Readable) {
      response.writeHead(answer.status, headers);
      // Its end, its failure (the response cut), or its client gone (what is left of the operation stops).
      pipeline(body, response, () => done());
      return;
    }
    if (body !== null) headers.push('content-length', String(Buffer.byteLength(body)));
    response.writeHead(answer.status, headers);
    response.end(body);
  } catch {
    if (body instanceof Readable) body.destroy();
    response.destroy();
  }
  done();
}

/** The HTTP transport: Node's request as the gateway's, its answer written back as it comes, on the one path. */
export function nodeTransport(serve: Serve): Handler {
  return (request, response) => {
    let served: MaybePromise<Served>;
    try {
      served = serve(new NodeIncoming(request, response));
    } catch {
      return void response.destroy();
    }
    if (served instanceof Promise)
      served.then(
        (ready) => send(response, ready),
        () => response.destroy(),
      );
    else send(response, served);
  };
}
