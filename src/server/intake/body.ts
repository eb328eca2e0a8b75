import { getSupportedEncodings, useContentEncoding } from '@whatwg-node/server';
import { createGraphQLError, type Plugin } from 'graphql-yoga';
import { refusalBody, refusalType } from '../http/refusal.js';

export interface RequestBodyOptions {
  /** Largest request body accepted (MAX_BODY_BYTES). */
  readonly maxBytes: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

const tooLarge = (maxBytes: number) =>
  createGraphQLError(`Request body is larger than ${maxBytes} bytes`, { extensions: { code: 'PAYLOAD_TOO_LARGE', limit: 'body', http: { status: 413 } } });

const identity = new Set(['identity', 'none']);

const unsupportedEncoding = (supported: readonly string[]) =>
  refusalBody(`The request body is sent in a content coding the gateway does not decode: send it as it is, or in one of ${supported.join(', ')}.`, 'UNSUPPORTED_MEDIA_TYPE');

/**
 * The codings of a Content-Encoding header as HTTP means them: case-insensitive, spaces around
 * the commas allowed, `identity` meaning none, `x-gzip` being `gzip` (RFC 9110 8.4.1). undefined
 * for codings useContentEncoding cannot apply: one it does not decode, or several (it would
 * decode only the last).
 */
function contentCodings(header: string, supported: readonly string[]): string[] | undefined {
  const codings = header
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && !identity.has(coding))
    .map((coding) => (coding === 'x-gzip' ? 'gzip' : coding));
  return codings.length <= 1 && codings.every((coding) => supported.includes(coding)) ? codings : undefined;
}

/** A body sent compressed: its Content-Length is its size on the wire, not what it inflates to. */
const isEncoded = (request: Request): boolean => {
  const encoding = request.headers.get('content-encoding');
  return encoding !== null && !identity.has(encoding.trim().toLowerCase());
};

/**
 * The request body, as it comes in:
 *
 * Bodies sent with `Content-Encoding: gzip` (or deflate, br) are inflated as they stream in, by
 * @whatwg-node/server's useContentEncoding (its request half; responses are compressed by the
 * HTTP server, http/http-server.ts); a coding it cannot decode is HTTP 415
 * UNSUPPORTED_MEDIA_TYPE, answered at once (onRequest). It puts no bound on what a body inflates
 * to: the cap below counts the inflated bytes, so a decompression bomb stops at the cap (HTTP
 * 413) with at most one chunk over it in memory.
 *
 * The body is capped before yoga buffers it: a declared Content-Length over the cap is
 * refused outright; a body without one (chunked), or a compressed one (counted as it inflates),
 * is counted as it streams in. A declared length
 * within the cap needs no counting: Node's HTTP parser ends the body at the declared length, and
 * piping every body through a counter costs every request (docs/performance.md#measured-reasons). That is why yoga's own `maxRequestBodySize`, which pipes
 * every body, is turned off in gateway.ts in favour of this one. A refusal is HTTP 413 with code
 * PAYLOAD_TOO_LARGE and `limit: "body"`. (Node's HTTP parser already answers 400 to a malformed Content-Length.)
 *
 * It works while yoga parses the request (`onRequestParse`), where a thrown GraphQLError
 * becomes an HTTP answer; thrown any earlier (`onRequest`) it would escape yoga and the Node
 * adapter would answer 500 with the error's stack.
 */
export function useRequestBody(options: RequestBodyOptions): Plugin {
  const decompression = useContentEncoding();
  const { maxBytes } = options;
  const refuse = () => {
    options.onRefused?.();
    return tooLarge(maxBytes);
  };
  return {
    onRequest(payload) {
      const { request, fetchAPI } = payload;
      const header = request.headers.get('content-encoding');
      if (header === null || request.body === null) return undefined;
      const supported = getSupportedEncodings(fetchAPI);
      const codings = contentCodings(header, supported);
      // useContentEncoding's own 415 was plain text quoting the header: a client's value in the body.
      if (codings === undefined) return payload.endResponse(new fetchAPI.Response(unsupportedEncoding(supported), { status: 415, headers: { 'content-type': refusalType } }));
      // useContentEncoding matches the names as written: it is handed them as it knows them.
      request.headers.set('content-encoding', codings[0] ?? 'identity');
      return decompression.onRequest!(payload as never);
    },
    onRequestParse({ request, requestParser, setRequestParser, fetchAPI }) {
      const declared = request.headers.get('content-length');
      if (declared !== null) {
        if (Number(declared) > maxBytes) throw refuse();
        if (!isEncoded(request)) return;
      }
      if (requestParser === undefined || request.body === null) return;
      setRequestParser((incoming) => {
        const body = incoming.body;
        if (body === null) return requestParser(incoming);
        // A native stream wants the native TransformStream, a ponyfill one the ponyfill's
        // (graphql-yoga#4583).
        const Transform = body instanceof ReadableStream ? globalThis.TransformStream : fetchAPI.TransformStream;
        let received = 0;
        const counted = body.pipeThrough(
          new Transform<Uint8Array, Uint8Array>({
            transform(chunk, controller) {
              received += chunk.byteLength;
              if (received > maxBytes) {
                controller.error(refuse());
                return;
              }
              controller.enqueue(chunk);
            },
          }),
        );
        return requestParser(
          new fetchAPI.Request(incoming.url, { method: incoming.method, headers: incoming.headers, body: counted, signal: incoming.signal, duplex: 'half' } as RequestInit),
        );
      });
    },
  };
}
