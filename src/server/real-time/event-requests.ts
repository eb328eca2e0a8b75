import { Readable } from 'node:stream';
import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import { pathOf } from '../http/paths.js';
import { refusalErrors } from '../http/refusal.js';
import type { Serve } from '../pipeline/stages.js';
import type { Incoming, OperationState, RequestHeaders } from '../request-state.js';

/** The subscription's headers but those that described its own body, which an event's request replaces. */
const replaced = new Set(['content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'x-request-id']);

/** A subscription's headers (its token, its caller's address, its app, its Accept), with the event request's own body headers and request id. */
class EventHeaders implements RequestHeaders {
  constructor(
    private readonly base: RequestHeaders,
    private readonly own: ReadonlyMap<string, string>,
  ) {}

  get(name: string): string | null {
    return this.own.get(name) ?? (replaced.has(name) ? null : this.base.get(name));
  }

  has(name: string): boolean {
    return this.get(name) !== null;
  }

  *keys(): Iterable<string> {
    for (const name of this.base.keys()) if (!replaced.has(name)) yield name;
    yield* this.own.keys();
  }
}

/**
 * The request of one event's resolution, on the subscriber's behalf: its subscription's request
 * again (the same caller, token, client and Accept), as a POST of the subscription's parameters
 * with its document as text (named already: by the subscription's request, which the trusted
 * documents checked), carrying the change and the trace it hangs under, under the subscription's
 * request id. No client waits on it (its transport is the subscription's stream): it is never
 * aborted, and its results are read, not written.
 */
function eventIncoming(subscription: OperationState, change: HeadChange): Incoming {
  const { request, params } = subscription;
  const body = Buffer.from(JSON.stringify({ query: subscription.prepared!.text, operationName: params.operationName ?? undefined, variables: params.variables ?? undefined }));
  const own = new Map([
    ['content-type', 'application/json'],
    ['content-length', String(body.byteLength)],
    ['x-request-id', request.requestId],
  ]);
  return {
    method: 'POST',
    target: pathOf(request.incoming.target),
    headers: new EventHeaders(request.headers, own),
    // Never aborted: its resolution is bounded by its operation's deadline, and shared, so no one subscriber's hang-up stops it.
    // Its own: the upstream layer listens on a request's signal for as long as the signal lives (a shared one would keep every listener).
    signal: new AbortController().signal,
    gone: false,
    peer: request.incoming.peer,
    body: Readable.from([body]),
    takesResults: true,
    event: { change, trace: subscription.record?.trace },
  };
}

/** What one event's resolution gives its subscribers: its result (a refusal's errors when a limit refused it), and the heads it read. */
export interface EventResult {
  readonly result: ExecutionResult;
  readonly heads: readonly string[];
}

/**
 * Resolves `change` for `subscription` as a request through the gateway's one door (`serve`):
 * an operation like any other, admitted (in flight, the caller's limits), planned, charged,
 * executed, masked, logged and measured; a refusal (OVERLOADED, RATE_LIMITED) is the event's
 * result, an error the stream carries on.
 */
export async function resolveEvent(serve: Serve, subscription: OperationState, change: HeadChange): Promise<EventResult> {
  const served = await serve(eventIncoming(subscription, change));
  try {
    const request = served.request!;
    const operation = request.operations[0];
    const result = request.refusal === undefined ? (operation?.result as ExecutionResult | undefined) : undefined;
    return { result: result ?? { errors: refusalErrors(request.refusal) }, heads: operation?.context?.loaders.heads.ids() ?? [] };
  } finally {
    served.done();
  }
}
