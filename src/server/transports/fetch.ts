import { Readable } from 'node:stream';
import type { Serve } from '../pipeline/stages.js';

/** Statuses whose answer has no body (a Response refuses one). */
const withoutBody = new Set([101, 204, 205, 304]);

/** A request's init as Node's fetch takes it: a body may be any byte array. */
type Init = Omit<RequestInit, 'body'> & { body?: BodyInit | Uint8Array | null };

/** A WHATWG Request in, a Response out (`done` once out), on the one path (`serve`): what tests and the bench drive. */
export function fetchTransport(serve: Serve): (input: RequestInfo | URL, init?: Init) => Promise<Response> {
  return async (input, init) => {
    const request = input instanceof Request && init === undefined ? input : new Request(input, init as RequestInit);
    const url = new URL(request.url);
    const body =
      request.body === null ? null : Readable.fromWeb(request.body as import('node:stream/web').ReadableStream);
    const { signal } = request;
    const { answer, done } = await serve({
      method: request.method,
      target: url.pathname + url.search,
      headers: request.headers,
      signal,
      get gone() {
        return signal.aborted;
      },
      peer: undefined,
      body,
    });
    // What the answer did not need of the body (a refusal at the door) is not read.
    body?.destroy();
    const stream = answer.body instanceof Readable ? answer.body : undefined;
    try {
      const headers = new Headers([...answer.headers]);
      if (stream !== undefined) {
        stream.once('close', done);
        return new Response(Readable.toWeb(stream) as ReadableStream, { status: answer.status, headers });
      }
      return new Response(
        withoutBody.has(answer.status) || request.method === 'HEAD' ? null : (answer.body as string | null),
        { status: answer.status, headers },
      );
    } catch (error) {
      stream?.destroy();
      throw error;
    } finally {
      if (stream === undefined || stream.destroyed) done();
    }
  };
}
