import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { RequestHeaders } from '../incoming.js';
import type { Policy } from '../pipeline/stages.js';
import { badRequest } from './params.js';

export interface RequestBodyOptions {
  /** Largest body accepted, once decoded (MAX_BODY_BYTES). */
  readonly maxBytes: number;
  readonly onRefused?: () => void;
}

const decoders = { gzip: createGunzip, deflate: createInflate, br: createBrotliDecompress } as const;
type Coding = keyof typeof decoders;
const supported = Object.keys(decoders) as Coding[];

const identity = new Set(['identity', 'none']);

/** A Content-Encoding's coding (RFC 9110 8.4.1): null for none; undefined for one not decoded, or several. */
function codingOf(header: string | null): Coding | null | undefined {
  if (header === null) return null;
  const codings = header
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && !identity.has(coding))
    .map((coding) => (coding === 'x-gzip' ? 'gzip' : coding));
  if (codings.length === 0) return null;
  return codings.length === 1 && (supported as string[]).includes(codings[0]!) ? (codings[0] as Coding) : undefined;
}

const unreadable = () => badRequest('The request body could not be read.');

/** Hands a body's bytes to `use` (the parameters' reader): what that made, or the refusal of the body. */
export type ReadBody = <T>(
  body: Readable | null,
  headers: RequestHeaders,
  use: (bytes: Buffer) => T,
) => Promise<T | GraphQLError>;

/**
 * Refuses unread a coding not decoded (415) or a Content-Length over MAX_BODY_BYTES (413; within it, the HTTP parser
 * ends the body). Others are counted as they inflate, stopping at the cap: a decompression bomb costs its cap.
 */
export function useRequestBody(options: RequestBodyOptions): Policy & { readonly read: ReadBody } {
  const { maxBytes } = options;
  const refuse = () => {
    options.onRefused?.();
    return createGraphQLError(`Request body is larger than ${maxBytes} bytes`, {
      extensions: { code: 'PAYLOAD_TOO_LARGE', limit: 'body', http: { status: 413 } },
    });
  };
  return {
    name: 'body',
    intake(request) {
      if (codingOf(request.headers.get('content-encoding')) === undefined)
        return createGraphQLError(
          `The request body is sent in a content coding the gateway does not decode: send it as it is, or in one of ${supported.join(', ')}.`,
          { extensions: { code: 'UNSUPPORTED_MEDIA_TYPE', http: { status: 415 } } },
        );
      const declared = request.headers.get('content-length');
      return declared !== null && Number(declared) > maxBytes ? refuse() : undefined;
    },
    read(body, headers, use) {
      // What the bytes make, in the turn they end (one promise per read); what `use` throws is the read's failure.
      if (body === null) return new Promise((resolve) => resolve(use(Buffer.alloc(0))));
      const coding = codingOf(headers.get('content-encoding'));
      const counted = coding !== null || headers.get('content-length') === null;
      const source: Readable = coding ? body.pipe(decoders[coding]()) : body;
      return new Promise((resolve, reject) => {
        const chunks: Buffer[] = [];
        let received = 0;
        // Over the cap: the rest is dropped, and its end makes nothing.
        let refused = false;
        const onData = (chunk: Buffer) => {
          received += chunk.byteLength;
          if (!counted || received <= maxBytes) return void chunks.push(chunk);
          // No more is kept, nor inflated; the rest is read and dropped so the answer can go out.
          source.off('data', onData);
          if (source !== body) {
            body.unpipe(source as unknown as NodeJS.WritableStream);
            source.destroy();
          }
          body.resume();
          refused = true;
          resolve(refuse());
        };
        source.on('data', onData);
        source.once('end', () => {
          if (refused) return;
          try {
            resolve(use(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
          } catch (error) {
            reject(error as Error);
          }
        });
        source.once('error', () => resolve(unreadable()));
        // pipe() leaves the decoder open when the body fails (its client gone): it is closed here.
        if (source !== body)
          body.once('error', () => {
            source.destroy();
            resolve(unreadable());
          });
      });
    },
  };
}
