import { createGraphQLError, type Plugin } from 'graphql-yoga';

export interface RequestSizeLimitOptions {
  /** Largest request body accepted. @default 100_000 */
  readonly maxBytes?: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

const tooLarge = (maxBytes: number) =>
  createGraphQLError(`Request body is larger than ${maxBytes} bytes`, { extensions: { code: 'PAYLOAD_TOO_LARGE', http: { status: 413 } } });

/**
 * Caps the request body before yoga buffers it: a declared Content-Length over the cap is
 * refused outright, and a body without one (chunked) is counted as it streams in.
 */
export function useRequestSizeLimit(options: RequestSizeLimitOptions = {}): Plugin {
  const maxBytes = options.maxBytes ?? 100_000;
  return {
    onRequest({ request, setRequest, fetchAPI }) {
      if (request.body === null) return;
      const declared = request.headers.get('content-length');
      if (declared !== null) {
        if (Number(declared) > maxBytes) {
          options.onRefused?.();
          throw tooLarge(maxBytes);
        }
        return;
      }
      let received = 0;
      const counted = request.body.pipeThrough(
        new fetchAPI.TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, controller) {
            received += chunk.byteLength;
            if (received > maxBytes) {
              options.onRefused?.();
              controller.error(tooLarge(maxBytes));
              return;
            }
            controller.enqueue(chunk);
          },
        }),
      );
      setRequest(new fetchAPI.Request(request.url, { method: request.method, headers: request.headers, body: counted, signal: request.signal, duplex: 'half' } as RequestInit));
    },
  };
}
