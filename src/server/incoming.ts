import type { Readable } from 'node:stream';

/* What a transport hands the gateway of a request, what it can carry an answer in, and a whole answer. */

/** A request's headers as every transport gives them, by lower-case name: a repeated header's values comma-joined. */
export interface RequestHeaders {
  get(name: string): string | null;
  has(name: string): boolean;
  keys(): Iterable<string>;
}

/** What every transport gives of a request: the headers that matter, its peer, and its client's hanging up. */
export interface Incoming {
  readonly headers: RequestHeaders;
  /** Aborted when the client hangs up: made when first asked for (a kept answer needs none). */
  readonly signal: AbortSignal;
  /** Whether the client has hung up, asked without making the signal. */
  readonly gone: boolean;
  /** The connection's peer address, where the transport has one. */
  readonly peer: string | undefined;
}

/** An HTTP request as its transport hands it over: its method, target and body besides. */
export interface HttpIncoming extends Incoming {
  readonly method: string;
  /** The request target as sent: its path and query (`/graphql?query=…`). */
  readonly target: string;
  /** The body as it streams in (null: none). Read by the intake stage, once. */
  readonly body: Readable | null;
}

/** An answer a step makes whole instead of going on: a refusal at the door (before a media type is agreed), a page. */
export interface WholeAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | null;
}

/** A request as library plugins read one (a fetch Request's method, URL and headers). */
export interface RequestLike {
  readonly method: string;
  readonly url: string;
  readonly headers: RequestHeaders;
}

/** The media types an answer goes out in: one JSON document, or parts (multipart/mixed, an event stream). */
export type AnswerType =
  | 'application/graphql-response+json'
  | 'application/json'
  | 'multipart/mixed'
  | 'text/event-stream';

/**
 * What a request's answer may go out in: for HTTP, what its Accept header allows (answers/negotiation.ts); for a
 * WebSocket message, messages; for a subscription's event, one result.
 */
export interface Negotiated {
  /** The type a whole answer goes out in (one result's, a batch's); undefined: none the client takes (406). */
  readonly whole: AnswerType | undefined;
  /** What carries an answer in parts; undefined: none (@defer and @stream then left out, a subscription refused). */
  readonly parts: AnswerType | 'websocket' | undefined;
  /** Whether its parts, in multipart/mixed, are in graphql-js 17.0.0-alpha.9's format. */
  readonly alpha9: boolean;
  /** Whether a subscription's parts, in multipart/mixed, are in Apollo's format (`{"payload": …}`, heartbeats). */
  readonly subscriptionSpec: boolean;
}
