import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { OperationName } from '../domain/operations.js';
import { defaultRoutes, type RouteTable } from '../upstream/routes.js';
import { ADMIN_PREFIX, createAdmin } from './admin.js';
import { receiveBody } from './bodies.js';
import { Exchange } from './exchange.js';
import { type Fault, FaultQueue } from './faults.js';
import { dispatch } from './handlers/index.js';
import { type RecordedRequest, Recording } from './recording.js';
import { BASE_PATH, compileRoutes, routeRequest } from './routing.js';
import { ReferenceStore } from './store.js';

export type { Fault } from './faults.js';
export type { RecordedRequest } from './recording.js';

export interface ReferenceUpstreamOptions {
  /** 0 (default) picks an ephemeral port. */
  port?: number;
  host?: string;
  routes?: RouteTable;
  /**
   * Keep the last requests for tests (default true); benchmarks turn it off. Counting per operation happens either way.
   */
  record?: boolean;
  keepAliveTimeoutMs?: number;
}

export interface ReferenceUpstream {
  /** Base URL ending in /v2, e.g. http://127.0.0.1:PORT/v2 */
  readonly url: string;
  readonly store: ReferenceStore;
  /** The last RECORDING_LIMIT requests, oldest first. */
  readonly requests: RecordedRequest[];
  inFlight(): number;
  maxInFlight(): number;
  /** Answers at once every request a latency fault is holding; returns how many (FaultQueue.releaseHeld). */
  releaseHeld(): number;
  resetRecording(): void;
  injectFault(operation: OperationName, fault: Fault, times?: number): void;
  clearFaults(): void;
  close(): Promise<void>;
  countsByOperation(): Record<string, number>;
}

const NOT_FOUND = JSON.stringify({ detail: 'Not Found' });
const METHOD_NOT_ALLOWED = JSON.stringify({ detail: 'Method Not Allowed' });

/**
 * Starts the in-memory reference implementation of the contract. It serves the route table under
 * `/v2`, plus admin endpoints under `/__reference/` for a process that cannot call the methods.
 * A request goes: route -> record -> read the body -> fault, if one is queued -> handler.
 */
export async function startReferenceUpstream(options: ReferenceUpstreamOptions = {}): Promise<ReferenceUpstream> {
  const host = options.host ?? '127.0.0.1';
  const router = compileRoutes(options.routes ?? defaultRoutes);
  const store = new ReferenceStore();
  const recording = new Recording(options.record ?? true);
  const handle = (ex: Exchange) => dispatch(ex, store);
  const faults = new FaultQueue(handle);
  const admin = createAdmin(recording, faults);

  function proceed(ex: Exchange): void {
    ex.remember();
    if (ex.match === undefined) {
      ex.send(404, NOT_FOUND);
      return;
    }
    if (ex.match === 'method-not-allowed') {
      ex.send(405, METHOD_NOT_ALLOWED);
      return;
    }
    // Recorded before the fault is taken, so a test can count the calls that got one.
    const fault = faults.take(ex.match.route.operation);
    if (fault !== undefined) faults.apply(ex, fault);
    else handle(ex);
  }

  function onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const queryStart = url.indexOf('?');
    const path = queryStart < 0 ? url : url.slice(0, queryStart);
    if (path.startsWith(ADMIN_PREFIX)) {
      admin(req, res, path);
      return;
    }

    const method = req.method ?? 'GET';
    const match = routeRequest(router, method, path);
    const query = queryStart < 0 ? undefined : Object.fromEntries(new URLSearchParams(url.slice(queryStart + 1)));
    receiveBody(new Exchange(req, res, match, query, recording, method, path), proceed);
  }

  const server = createServer(onRequest);
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  let closing: Promise<void> | undefined;
  function close(): Promise<void> {
    closing ??= new Promise<void>((resolve) => {
      faults.cancelTimers();
      server.close(() => resolve());
      // server.close alone would wait for idle keep-alive sockets to time out.
      server.closeAllConnections();
    });
    return closing;
  }

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${BASE_PATH}`,
    store,
    requests: recording.requests,
    inFlight: () => recording.inFlight(),
    maxInFlight: () => recording.maxInFlight(),
    releaseHeld: () => faults.releaseHeld(),
    resetRecording: () => recording.reset(),
    injectFault: (operation, fault, times) => faults.inject(operation, fault, times),
    clearFaults: () => faults.clear(),
    close,
    countsByOperation: () => recording.countsByOperation(),
  };
}
