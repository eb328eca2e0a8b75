import type { IncomingMessage } from 'node:http';
import { isPlainObject, missing, type ValidationIssue } from './validation.js';

export type Body =
  | { kind: 'none' }
  | { kind: 'json'; value: unknown }
  | { kind: 'invalid-json'; text: string; error: string }
  | { kind: 'form'; value: Record<string, string> }
  | { kind: 'other'; text: string };

export const NO_BODY: Body = { kind: 'none' };

/** What reading a body needs of an exchange (exchange.ts): its request, where the body goes, how to refuse it. */
export interface BodyReceiver {
  readonly req: IncomingMessage;
  body: Body;
  remember(): void;
  send(status: number, json: string | undefined, extraHeaders?: Record<string, string>): void;
  finish(status: number | undefined): void;
}

/** Large enough for any contract body, small enough that a runaway client cannot exhaust memory. */
const BODY_LIMIT = 1 << 20;
const TOO_LARGE = JSON.stringify({ detail: 'Request body too large' });

/**
 * Reads the request body into `ex.body`, then calls `proceed`. A body over BODY_LIMIT is answered
 * 413 and the connection closed; a client gone mid-body ends the exchange with no answer.
 */
export function receiveBody<E extends BodyReceiver>(ex: E, proceed: (ex: E) => void): void {
  const { req } = ex;
  const headers = req.headers;
  const hasBody =
    (headers['content-length'] !== undefined && headers['content-length'] !== '0') ||
    headers['transfer-encoding'] !== undefined;
  if (!hasBody) {
    proceed(ex);
    return;
  }

  const chunks: Buffer[] = [];
  let size = 0;
  let complete = false;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > BODY_LIMIT) {
      if (!complete) {
        complete = true;
        ex.remember();
        ex.send(413, TOO_LARGE, { connection: 'close' });
        req.destroy();
      }
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (complete) return;
    complete = true;
    ex.body = parseBody(headers['content-type'], Buffer.concat(chunks, size));
    proceed(ex);
  });
  // The client went away mid-body: nothing to answer, but the in-flight slot must be released.
  req.on('close', () => {
    if (!complete) {
      complete = true;
      ex.finish(undefined);
    }
  });
}

function parseBody(contentType: string | undefined, raw: Buffer): Body {
  if (raw.length === 0) return NO_BODY;
  const text = raw.toString('utf8');
  const type = contentType === undefined ? undefined : contentType.split(';', 1)[0]!.trim().toLowerCase();
  // Like FastAPI, a body without content-type is tried as JSON.
  if (type === undefined || type === 'application/json' || type.endsWith('+json')) {
    try {
      return { kind: 'json', value: JSON.parse(text) };
    } catch (error) {
      return { kind: 'invalid-json', text, error: (error as Error).message };
    }
  }
  if (type === 'application/x-www-form-urlencoded')
    return { kind: 'form', value: Object.fromEntries(new URLSearchParams(text)) };
  return { kind: 'other', text };
}

/** The body as a test reads it from the recording. */
export function recordedBody(body: Body): unknown {
  switch (body.kind) {
    case 'none':
      return undefined;
    case 'json':
    case 'form':
      return body.value;
    case 'invalid-json':
    case 'other':
      return body.text;
  }
}

/** The JSON object of an Update body, or the FastAPI issue that stops validation of its fields. */
export function jsonObjectBody(body: Body, issues: ValidationIssue[]): Record<string, unknown> | undefined {
  switch (body.kind) {
    case 'none':
      issues.push(missing(['body']));
      return undefined;
    case 'invalid-json':
      issues.push({
        type: 'json_invalid',
        loc: ['body'],
        msg: 'JSON decode error',
        input: {},
        ctx: { error: body.error },
      });
      return undefined;
    case 'json':
      if (body.value === null) {
        issues.push(missing(['body']));
        return undefined;
      }
      if (isPlainObject(body.value)) return body.value;
      issues.push(modelAttributesType(body.value));
      return undefined;
    case 'form':
      issues.push(modelAttributesType(body.value));
      return undefined;
    case 'other':
      issues.push(modelAttributesType(body.text));
      return undefined;
  }
}

const modelAttributesType = (input: unknown): ValidationIssue => ({
  type: 'model_attributes_type',
  loc: ['body'],
  msg: 'Input should be a valid dictionary or object to extract fields from',
  input,
});
