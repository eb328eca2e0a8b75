import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { GraphQLError } from 'graphql';
import { createGraphQLError } from 'graphql-yoga';
import type { RequestHeaders } from '../incoming.js';
import type { Policy } from '../pipeline/stages.js';

export interface RequestBodyOptions {
  /** Largest request body accepted, once decoded (MAX_BODY_BYTES). */
  readonly maxBytes: number;
  /** Told of every refusal, for metrics. */
  readonly onRefused?: () => void;
}

/** The content codings a body may come in, each with its decoder (node:zlib). */
const decoders = { gzip: createGunzip, deflate: createInflate, br: createBrotliDecompress } as const;
type Coding = keyof typeof decoders;
const supported = Object.keys(decoders) as Coding[];

const identity = new Set(['identity', 'none']);

const tooLarge = (maxBytes: number) =>
  createGraphQLError(`Request body is larger than ${maxBytes} bytes`, {
    extensions: { code: 'PAYLOAD_TOO_LARGE', limit: 'body', http: { status: 413 } },
  });

const unsupportedEncoding = () =>
  createGraphQLError(
    `The request body is sent in a content coding the gateway does not decode: send it as it is, or in one of ${supported.join(', ')}.`,
    { extensions: { code: 'UNSUPPORTED_MEDIA_TYPE', http: { status: 415 } } },
  );

/**
 * The coding of a Content-Encoding header as HTTP means it: case-insensitive, spaces around the
 * commas allowed, `identity` meaning none, `x-gzip` being `gzip` (RFC 9110 8.4.1); null for none;
 * undefined for one it does not decode, or several (a body coded twice is refused, not decoded twice).
 */
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

const unreadable = () =>
  createGraphQLError('The request body could not be read.', {
    extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
  });

/**
 * Reads a request's body and hands its bytes to `use` (the parameters' reader); resolves with what that made, or with
 * the refusal of a body over the cap or one that could not be read.
 */
export type ReadBody = <T>(
  body: Readable | null,
  headers: RequestHeaders,
  use: (bytes: Buffer) => T,
) => Promise<T | GraphQLError>;

/**
 * The request body, as it comes in, for the intake stage:
 *
 * - its head first (`intake`): a coding it cannot decode is HTTP 415 UNSUPPORTED_MEDIA_TYPE, a
 *   declared Content-Length over MAX_BODY_BYTES HTTP 413, before a byte of it is read;
 * - then its bytes (`read`, handed to the parameters' reader: intake/params.ts), inflated as they stream
 *   in when it is sent with `Content-Encoding: gzip` (or deflate, br), and counted: a body without
 *   a declared length (chunked) or a compressed one (counted as it inflates) stops at the cap
 *   (HTTP 413, code PAYLOAD_TOO_LARGE, `limit: "body"`) with at most one chunk over it in memory,
 *   so a decompression bomb costs its cap. A declared length within the cap needs no counting:
 *   the HTTP parser ends the body there.
 */
export function useRequestBody(options: RequestBodyOptions): Policy & { readonly read: ReadBody } {
  const { maxBytes } = options;
  const refuse = () => {
    options.onRefused?.();
    return tooLarge(maxBytes);
  };
  return {
    name: 'body',
    intake(request) {
      const { headers } = request;
      if (codingOf(headers.get('content-encoding')) === undefined) return unsupportedEncoding();
      const declared = headers.get('content-length');
      return declared !== null && Number(declared) > maxBytes ? refuse() : undefined;
    },
    read(body, headers, use) {
      // What the bytes make, in the same turn they end (one promise for the whole read); what `use` throws is the
      // read's failure.
      if (body === null) {
        try {
          return Promise.resolve(use(Buffer.alloc(0)));
        } catch (error) {
          return Promise.reject(error as Error);
        }
      }
      const coding = codingOf(headers.get('content-encoding'));
      const counted = coding !== null || headers.get('content-length') === null;
      const source: Readable = coding ? body.pipe(decoders[coding]()) : body;
      return new Promise((resolve, reject) => {
        const chunks: Buffer[] = [];
        let received = 0;
        // Refused over the cap: what is left of the body is dropped, and its end makes nothing.
        let refused = false;
        const onData = (chunk: Buffer) => {
          received += chunk.byteLength;
          if (!counted || received <= maxBytes) {
            chunks.push(chunk);
            return;
          }
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
        if (source !== body) {
          body.once('error', () => {
            source.destroy();
            resolve(unreadable());
          });
        }
      });
    },
  };
}
