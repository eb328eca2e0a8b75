import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { type Client, createClient } from 'graphql-ws';
import { WebSocket } from 'ws';
import type { Side } from './differential.js';
import { type GeneratedRequest, generatedRequests } from './generated-requests.js';
import { until } from './until.js';

/*
 * The transports' differential comparison (test/differential-transports.test.ts): two gateways
 * alike, each on a reference upstream of its own seeded alike; one is sent each generated operation
 * over HTTP (POST, JSON answers), the other the same operation as a graphql-ws `subscribe` message
 * on a WebSocket whose `connection_init` carried the same token. Both enter the one path's
 * operation entry (HTTP after its intake), so every send must get the same result, byte for byte
 * (the order of keys is part of it), and make the same upstream calls. An operation refused before
 * it runs is a 4xx answer over HTTP and an `error` message over WebSocket: the errors compared are
 * the same either way.
 */

const SENDS = 2;

type Auth = GeneratedRequest['auth'];

/** What a send gave: the result as its transport carried it, and the upstream calls it made. */
interface Observed {
  /** HTTP: the answer's body; WebSocket: each `next` payload, or `{"errors":…}` for an `error` message. */
  readonly result: string;
  readonly calls: string[];
}

const callsOf = (on: Side): string[] =>
  on.t
    .calls()
    .map(
      (call) =>
        `${call.operation ?? '(no route)'} ${call.method} ${call.path}${Object.keys(call.query).length > 0 ? `?${new URLSearchParams(call.query)}` : ''} → ${call.status ?? 'no answer'}`,
    )
    .sort();

const authorizationOf = (on: Side, auth: Auth): string | undefined =>
  auth === 'none' ? undefined : `Bearer ${auth === 'demo token' ? on.token : 'not-a-token-of-this-upstream'}`;

const paramsOf = (request: GeneratedRequest, text: string) => ({
  query: text,
  ...(request.variables === undefined ? {} : { variables: request.variables }),
  ...(request.operationName === undefined ? {} : { operationName: request.operationName }),
  ...(request.extensions === undefined ? {} : { extensions: request.extensions }),
});

async function settled(on: Side, requestId: string): Promise<string[]> {
  await until(() => on.t.reference.inFlight() === 0, `${on.name}: the upstream calls of ${requestId} to end`);
  return callsOf(on);
}

async function overHttp(on: Side, request: GeneratedRequest, text: string, requestId: string): Promise<Observed> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/graphql-response+json',
    'x-request-id': requestId,
  };
  const authorization = authorizationOf(on, request.auth);
  if (authorization !== undefined) headers.authorization = authorization;
  on.t.reset();
  const response = await fetch(on.endpoint, { method: 'POST', headers, body: JSON.stringify(paramsOf(request, text)) });
  const result = await response.text();
  return { result, calls: await settled(on, requestId) };
}

/** One graphql-ws client per token, as an app holds one socket per signed-in user. */
class Sockets {
  readonly #clients = new Map<Auth, Client>();
  constructor(private readonly on: Side) {}

  client(auth: Auth): Client {
    let client = this.#clients.get(auth);
    if (client === undefined) {
      const authorization = authorizationOf(this.on, auth);
      const url = this.on.endpoint.replace(/^http/, 'ws');
      client = createClient({
        url,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        lazy: false,
        connectionParams: authorization === undefined ? {} : { authorization },
      });
      this.#clients.set(auth, client);
    }
    return client;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#clients.values()].map((client) => client.dispose()));
  }
}

async function overWebSocket(
  on: Side,
  sockets: Sockets,
  request: GeneratedRequest,
  text: string,
  requestId: string,
): Promise<Observed> {
  on.t.reset();
  const results: string[] = [];
  await new Promise<void>((resolve, reject) =>
    sockets.client(request.auth).subscribe(paramsOf(request, text), {
      next: (value) => void results.push(JSON.stringify(value)),
      error: (error: unknown) => {
        // An `error` message: the operation's errors (graphql-ws hands the array over as it came); anything else is the
        // socket's failure.
        if (Array.isArray(error)) {
          results.push(JSON.stringify({ errors: error }));
          resolve();
        } else
          reject(new Error(`${requestId}: the socket failed: ${String((error as { code?: number }).code ?? error)}`));
      },
      complete: resolve,
    }),
  );
  return { result: results.join('\n'), calls: await settled(on, requestId) };
}

/**
 * Sends `runs` generated operations (seeded), each `SENDS` times, over HTTP to one side and over
 * WebSocket to the other; throws at the first send that differs, showing both.
 */
export async function compareTransports(
  http: Side,
  websocket: Side,
  options: { readonly seed: number; readonly runs: number },
): Promise<{ requests: number; sends: number; executed: number; refused: number; withCalls: number }> {
  const ids = http.t.reference.store.headIds();
  if (!isDeepStrictEqual(websocket.t.reference.store.headIds(), ids))
    throw new Error('the two upstreams hold different heads');
  const sockets = new Sockets(websocket);
  const seen = { requests: 0, sends: 0, executed: 0, refused: 0, withCalls: 0 };
  try {
    await fc.assert(
      fc.asyncProperty(generatedRequests(ids), async (request) => {
        const id = seen.requests++;
        const text = `${request.query}\n# transports run ${id}`;
        for (let i = 0; i < SENDS; i++) {
          const requestId = `transports-${id}-${i}`;
          const [a, b] = await Promise.all([
            overHttp(http, request, text, requestId),
            overWebSocket(websocket, sockets, request, text, requestId),
          ]);
          seen.sends++;
          if (!isDeepStrictEqual(a, b)) {
            const operation = JSON.stringify({ ...paramsOf(request, text), auth: request.auth });
            throw new Error(
              [
                `send ${i + 1} of ${SENDS} differs`,
                `operation: ${operation}`,
                `  http:      ${JSON.stringify(a)}`,
                `  websocket: ${JSON.stringify(b)}`,
              ].join('\n'),
            );
          }
          if (i > 0) continue;
          if (a.result.includes('"data":')) seen.executed++;
          if (/"code":"GRAPHQL_(PARSE|VALIDATION)_FAILED"/.test(a.result)) seen.refused++;
          if (a.calls.length > 0) seen.withCalls++;
        }
      }),
      { seed: options.seed, numRuns: options.runs },
    );
  } finally {
    await sockets.close();
  }
  return seen;
}
