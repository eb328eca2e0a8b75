import type { Dispatcher } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultTracingSettings } from '../src/config.js';
import type { OperationName } from '../src/domain/operations.js';
import { createTracing } from '../src/telemetry/tracing.js';
import type { CallGuard } from '../src/upstream/call-guard.js';
import { UpstreamCircuits } from '../src/upstream/circuits.js';
import type { UpstreamErrorCode } from '../src/upstream/errors.js';
import { RetryBudget } from '../src/upstream/retry-budget.js';
import { defaultRoutes } from '../src/upstream/routes.js';
import { UpstreamTransport } from '../src/upstream/transport.js';
import { until } from './support/until.js';

/** A dispatcher the test answers by hand: each dispatched request waits in `pending`. */
function fakeDispatcher() {
  const pending: {
    path: string;
    method: string;
    answer: (status: number, body?: string) => void;
    fail: (error: Error) => void;
  }[] = [];
  const sent: string[] = [];
  const dispatcher = {
    dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) {
      sent.push(`${options.method} ${options.path}`);
      let done = false;
      const controller = {
        aborted: false,
        paused: false,
        reason: null,
        abort(reason: Error) {
          if (done) return;
          done = true;
          handler.onResponseError?.(controller as never, reason);
        },
        pause() {},
        resume() {},
      };
      handler.onRequestStart?.(controller as never, {});
      pending.push({
        path: String(options.path),
        method: String(options.method),
        answer(status, body = '{}') {
          if (done) return;
          done = true;
          handler.onResponseStart?.(controller as never, status, {}, '');
          handler.onResponseData?.(controller as never, Buffer.from(body));
          handler.onResponseEnd?.(controller as never, {});
        },
        fail(error) {
          controller.abort(error);
        },
      });
      return true;
    },
  } as unknown as Dispatcher;
  return { dispatcher, pending, sent };
}

/** A guard that counts what it admits and what it is told settled. */
class CountingGuard implements CallGuard {
  admitted = 0;
  settledCodes: (UpstreamErrorCode | undefined)[] = [];
  admit(_operation: OperationName): UpstreamErrorCode | undefined {
    this.admitted++;
    return undefined;
  }
  settled(_operation: OperationName, code: UpstreamErrorCode | undefined): void {
    this.settledCodes.push(code);
  }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 5));
const settle = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (error: { code?: string }) => error.code,
  );

afterEach(() => {
  vi.restoreAllMocks();
});

/*
 * The attempts of one upstream call, driven by hand through a dispatcher the test answers: what a
 * request that joins a shared GET during its retry's pause is charged, what the retry budget and
 * the breaker are told of a retry that is never sent, and what a client leaving says to a
 * half-open breaker. (Found in review; each failed before its fix.)
 */

describe('the guard of a request that joins a shared GET during its retry pause', () => {
  it('is charged only if the retry is sent: not when the call times out in the pause', async () => {
    const { dispatcher, pending, sent } = fakeDispatcher();
    const transport = new UpstreamTransport({
      baseUrl: 'http://upstream/v2',
      routes: defaultRoutes,
      dispatcher,
      timeoutMs: 150,
      dedupe: true,
      // The pause before the retry is 400 ms, past the call's 150 ms timeout.
      retry: { limit: 2, statusCodes: [503], errorCodes: [], baseDelayMs: 1_000_000, maxDelayMs: 400 },
      tracing: createTracing(defaultTracingSettings),
    });
    const first = new CountingGuard();
    const joiner = new CountingGuard();
    const a = settle(transport.forRequest({ requestId: 'a', guard: first }).call({ operation: 'listHeads' }));
    await tick();
    pending[0]!.answer(503);
    await tick();
    // The shared call is pausing before its retry; a second request joins it.
    const b = settle(transport.forRequest({ requestId: 'b', guard: joiner }).call({ operation: 'listHeads' }));
    expect(await a).toBe('UPSTREAM_TIMEOUT');
    expect(await b).toBe('UPSTREAM_TIMEOUT');
    expect(sent).toHaveLength(1);
    // The first request: one attempt, admitted and settled once.
    expect([first.admitted, first.settledCodes.length]).toEqual([1, 1]);
    // The retry was never sent: the joiner was charged for nothing.
    expect([joiner.admitted, joiner.settledCodes.length]).toEqual([0, 0]);
  });

  it('is charged only if the retry is sent: not when the breaker opens in the pause', async () => {
    const { dispatcher, pending, sent } = fakeDispatcher();
    const circuits = new UpstreamCircuits({ failureRatio: 0.5, window: 4, minimumCalls: 2, resetMs: 60_000 });
    const transport = new UpstreamTransport({
      baseUrl: 'http://upstream/v2',
      routes: defaultRoutes,
      dispatcher,
      timeoutMs: 5_000,
      dedupe: true,
      circuits,
      retry: { limit: 2, statusCodes: [503], errorCodes: [], baseDelayMs: 1_000_000, maxDelayMs: 200 },
      tracing: createTracing(defaultTracingSettings),
    });
    const first = new CountingGuard();
    const joiner = new CountingGuard();
    const a = settle(transport.forRequest({ requestId: 'a', guard: first }).call({ operation: 'listHeads' }));
    // Another read of the same operation (another page), in flight at once.
    const other = settle(transport.forRequest({ requestId: 'o' }).call({ operation: 'listHeads', query: { page: 2 } }));
    await tick();
    pending[0]!.answer(503); // 1 failure of 1: below the minimum, the shared read pauses before its retry
    await tick();
    const b = settle(transport.forRequest({ requestId: 'b', guard: joiner }).call({ operation: 'listHeads' }));
    pending[1]!.answer(500); // 2 failures of 2: the breaker opens during the pause
    await other;
    expect(circuits.stateOf('listHeads')).toBe('open');
    // Both fail as the attempt that was sent did: the upstream's 503.
    expect(await a).toBe('UPSTREAM_ERROR');
    expect(await b).toBe('UPSTREAM_ERROR');
    expect(sent).toHaveLength(2);
    expect([joiner.admitted, joiner.settledCodes.length]).toEqual([0, 0]);
  });
});

describe('the retry budget', () => {
  it('gets back a retry that is never sent (the client went away during the pause)', async () => {
    const { dispatcher, pending, sent } = fakeDispatcher();
    let refused = 0;
    const transport = new UpstreamTransport({
      baseUrl: 'http://upstream/v2',
      routes: defaultRoutes,
      dispatcher,
      timeoutMs: 5_000,
      // One retry in the window, whatever the traffic.
      budget: new RetryBudget({ ratio: 0, minPerSecond: 0.1 }),
      onRetryRefused: () => refused++,
      retry: { limit: 2, statusCodes: [503], errorCodes: [], baseDelayMs: 1_000_000, maxDelayMs: 200 },
      tracing: createTracing(defaultTracingSettings),
    });
    const client = new AbortController();
    const a = settle(transport.forRequest({ requestId: 'a', signal: client.signal }).call({ operation: 'listHeads' }));
    await tick();
    pending[0]!.answer(503);
    await tick();
    client.abort(); // during the pause: the retry is never sent
    expect(await a).toBe('ABORTED');
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(sent).toHaveLength(1);
    // A second read fails once: no retry has been sent so far, so the budget should allow one.
    const b = settle(transport.forRequest({ requestId: 'b' }).call({ operation: 'listHeads' }));
    await tick();
    pending[1]!.answer(503);
    await tick();
    expect(refused).toBe(0);
    await until(() => sent.length === 3, 'the second read retried');
    pending[2]!.answer(200);
    expect(await b).toBe('resolved');
  });
});

describe('a GET whose retry the open breaker refused', () => {
  it('fails as its first attempt did (sent, answered 503), not as "circuit open, sent: false"', async () => {
    const { dispatcher, pending } = fakeDispatcher();
    const circuits = new UpstreamCircuits({ failureRatio: 0.5, window: 4, minimumCalls: 2, resetMs: 60_000 });
    const transport = new UpstreamTransport({
      baseUrl: 'http://upstream/v2',
      routes: defaultRoutes,
      dispatcher,
      timeoutMs: 5_000,
      circuits,
      retry: { limit: 2, statusCodes: [503], errorCodes: [], baseDelayMs: 1_000_000, maxDelayMs: 200 },
      tracing: createTracing(defaultTracingSettings),
    });
    const read = transport
      .forRequest({ requestId: 'a' })
      .call({ operation: 'listHeads' })
      .catch((e: unknown) => e as { code: string; reason?: string; status?: number });
    const other = transport
      .forRequest({ requestId: 'o' })
      .call({ operation: 'listHeads', query: { page: 2 } })
      .catch(() => undefined);
    await tick();
    pending[0]!.answer(503);
    await tick();
    pending[1]!.answer(500);
    await other;
    const error = (await read) as { code: string; reason?: string; status?: number };
    // What the client reads (schema/errors.ts): the 503 it got, not "circuit open" (upstream.sent: false).
    expect(error).toMatchObject({ code: 'UPSTREAM_ERROR', status: 503 });
    expect(error.reason).not.toBe('circuit open');
  });
});

describe('a client going away while the breaker is half-open', () => {
  it("says nothing of the upstream when the call is not the probe: the probe's success closes the breaker", async () => {
    const { dispatcher, pending } = fakeDispatcher();
    const circuits = new UpstreamCircuits({ failureRatio: 0.5, window: 4, minimumCalls: 2, resetMs: 50 });
    const transport = new UpstreamTransport({
      baseUrl: 'http://upstream/v2',
      routes: defaultRoutes,
      dispatcher,
      timeoutMs: 5_000,
      circuits,
      retry: { limit: 0, statusCodes: [], errorCodes: [], baseDelayMs: 1, maxDelayMs: 1 },
      tracing: createTracing(defaultTracingSettings),
    });
    const client = new AbortController();
    const slow = settle(
      transport
        .forRequest({ requestId: 's', signal: client.signal })
        .call({ operation: 'getHeadById', params: { id: '0' } }),
    );
    const f1 = settle(
      transport.forRequest({ requestId: 'f1' }).call({ operation: 'getHeadById', params: { id: '1' } }),
    );
    const f2 = settle(
      transport.forRequest({ requestId: 'f2' }).call({ operation: 'getHeadById', params: { id: '2' } }),
    );
    await tick();
    pending[1]!.answer(500);
    pending[2]!.answer(500);
    await Promise.all([f1, f2]);
    expect(circuits.stateOf('getHeadById')).toBe('open');
    await new Promise((resolve) => setTimeout(resolve, 60));
    const probe = settle(
      transport.forRequest({ requestId: 'p' }).call({ operation: 'getHeadById', params: { id: '3' } }),
    );
    expect(circuits.stateOf('getHeadById')).toBe('half_open');
    client.abort(); // the slow read's client goes: says nothing of the upstream
    expect(await slow).toBe('ABORTED');
    pending[3]!.answer(200);
    expect(await probe).toBe('resolved');
    expect(circuits.stateOf('getHeadById')).toBe('closed');
  });
});
