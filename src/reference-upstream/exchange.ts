import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OperationName } from '../upstream/routes.js';
import { NO_BODY, recordedBody, type Body } from './bodies.js';
import type { RecordedRequest, Recording } from './recording.js';
import type { RouteMatch } from './routing.js';
import type { ValidationIssue } from './validation.js';

const JSON_TYPE = 'application/json';
const NOT_AUTHENTICATED = JSON.stringify({ detail: 'Not authenticated' });
const UNAUTHORIZED_HEADERS = { 'www-authenticate': 'Bearer' };

/** One request and its answer, from arrival to the last byte (or to the client going away). */
export class Exchange {
  readonly operation: OperationName | undefined;
  readonly param: string | undefined;
  body: Body = NO_BODY;
  record: RecordedRequest | undefined = undefined;
  private finished = false;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly match: RouteMatch,
    readonly query: Record<string, string> | undefined,
    private readonly recording: Recording,
  ) {
    this.operation = typeof match === 'object' ? match.route.operation : undefined;
    this.param = typeof match === 'object' ? match.param : undefined;
  }

  /** Answers with a JSON text, or with no body when `json` is undefined. */
  send(status: number, json: string | undefined, extraHeaders?: Record<string, string>): void {
    if (json === undefined) {
      this.res.writeHead(status, extraHeaders);
      this.res.end();
    } else {
      this.res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(json), ...extraHeaders });
      this.res.end(json);
    }
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
