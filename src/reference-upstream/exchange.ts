import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OperationName } from '../domain/operations.js';
import { type Body, NO_BODY, recordedBody } from './bodies.js';
import type { RecordedRequest, Recording } from './recording.js';
import type { RouteMatch } from './routing.js';
import type { ValidationIssue } from './validation.js';

const NOT_AUTHENTICATED = JSON.stringify({ detail: 'Not authenticated' });
const UNAUTHORIZED_HEADERS = { 'www-authenticate': 'Bearer' };

/** Answers `res` with a JSON text, or with no body when `json` is undefined. */
export function writeJson(
  res: ServerResponse,
  status: number,
  json: string | undefined,
  extraHeaders?: Record<string, string>,
): void {
  if (json === undefined) {
    res.writeHead(status, extraHeaders);
    res.end();
  } else {
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(json),
      ...extraHeaders,
    });
    res.end(json);
  }
}

/**
 * One request and its answer, from arrival to the last byte (or to the client going away); recorded from its arrival.
 */
export class Exchange {
  readonly operation: OperationName | undefined;
  readonly param: string | undefined;
  body: Body = NO_BODY;
  private readonly record: RecordedRequest | undefined;
  private finished = false;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly match: RouteMatch,
    readonly query: Record<string, string> | undefined,
    private readonly recording: Recording,
    method: string,
    path: string,
  ) {
    const routed = typeof match === 'object' ? match : undefined;
    this.operation = routed?.route.operation;
    this.param = routed?.param;
    this.record = recording.begin(routed?.route, method, path, query, req.headers);
  }

  /** Answers with a JSON text, or with no body when `json` is undefined. */
  send(status: number, json: string | undefined, extraHeaders?: Record<string, string>): void {
    writeJson(this.res, status, json, extraHeaders);
    this.finish(status);
  }

  /** FastAPI's 422 with every issue found. */
  sendIssues(issues: ValidationIssue[]): void {
    this.send(422, JSON.stringify({ detail: issues }));
  }

  unauthorized(json = NOT_AUTHENTICATED): void {
    this.send(401, json, UNAUTHORIZED_HEADERS);
  }

  /** Ends the exchange once, answered with `status` or with nothing (undefined). */
  finish(status: number | undefined): void {
    if (this.finished) return;
    this.finished = true;
    this.recording.end(this.record, status);
  }

  /** Adds the request to the recording, with its body as read so far. */
  remember(): void {
    if (this.record !== undefined) this.recording.remember(this.record, recordedBody(this.body));
  }
}
