import { type ExecutionResult, type OperationDefinitionNode, parse } from 'graphql';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { HeadChange } from '../src/domain/head-changes.js';
import { RealTimeMetrics } from '../src/server/instruments/real-time-metrics.js';
import { isPrepared, OperationState } from '../src/server/operation-state.js';
import { changeQueue } from '../src/server/real-time/change-queue.js';
import { EventResolutions } from '../src/server/real-time/event-resolutions.js';
import { subscriberStream } from '../src/server/real-time/subscriber-stream.js';
import { RequestState } from '../src/server/request-state.js';

/*
 * The streams of real time keep the async iterator protocol (server/real-time/, Repeaters): two
 * `next()` calls at once each settle, in order, with a value of their own; a `return()` while a
 * `next()` waits settles that `next()` as done, and what the stream held is let go.
 */

/** A head's listener by hand: what `listen` was given, and whether it is still listened to. */
function listener() {
  const state = { onChange: undefined as ((change: HeadChange) => void) | undefined, listening: false };
  const listen = (_id: string, onChange: (change: HeadChange) => void) => {
    state.onChange = onChange;
    state.listening = true;
    return () => {
      state.listening = false;
    };
  };
  return { state, listen };
}

const change = (n: number, extra: Partial<HeadChange> = {}): HeadChange => ({
  id: 'h',
  at: Date.now(),
  eventId: `${Date.now()}-${n}`,
  ...extra,
});

describe('a subscriber’s change queue', () => {
  it('two next() at once: each settles with its own change, in order', async () => {
    const { state, listen } = listener();
    let finished = 0;
    const queue = changeQueue(listen, 'h', { onFinish: () => finished++, onFolded: () => undefined });
    const [first, second] = [queue.next(), queue.next()];
    state.onChange!(change(1));
    state.onChange!(change(2));
    expect((await first).value?.eventId).toMatch(/-1$/);
    expect((await second).value?.eventId).toMatch(/-2$/);
    await queue.return!(undefined);
    expect(finished).toBe(1);
    expect(state.listening).toBe(false);
  });

  it('return() while a next() waits: that next() settles done, and the head is no longer listened to', async () => {
    const { state, listen } = listener();
    const queue = changeQueue(listen, 'h', { onFinish: () => undefined, onFolded: () => undefined });
    const waiting = queue.next();
    await Promise.resolve();
    expect(state.listening).toBe(true);
    await queue.return!(undefined);
    expect(await waiting).toEqual({ done: true, value: undefined });
    expect(state.listening).toBe(false);
    expect(await queue.next()).toEqual({ done: true, value: undefined });
  });

  it('changes not taken fold into the latest, a deletion kept: a slow subscriber never has more than one waiting', async () => {
    const { state, listen } = listener();
    let folded = 0;
    const queue = changeQueue(listen, 'h', { onFinish: () => undefined, onFolded: () => folded++ });
    const first = queue.next();
    state.onChange!(change(1));
    await first;
    for (let n = 2; n <= 5; n++) state.onChange!(change(n, n === 3 ? { deleted: true } : {}));
    expect((await queue.next()).value).toMatchObject({ deleted: true });
    expect(folded).toBe(1);
    await queue.return!(undefined);
  });
});

describe('a subscriber’s stream of results', () => {
  /** A subscription operation, and its events resolved by an entry that answers each with its change's id. */
  function subscription() {
    const request = RequestState.ofHttp(
      {
        method: 'POST',
        target: '/graphql',
        headers: new Headers(),
        signal: new AbortController().signal,
        gone: false,
        peer: undefined,
        body: null,
      },
      { trustProxy: undefined, callerOf: () => undefined },
    );
    request.negotiated = {
      whole: 'application/json',
      parts: 'text/event-stream',
      alpha9: false,
      subscriptionSpec: false,
    };
    const text = 'subscription { headChanged(id: "h") { id } }';
    const operation = new OperationState({ query: text }, request);
    const document = parse(text);
    // What the document stage writes (documents/prepared.ts).
    operation.prepared = { text, document, incremental: false, plain: document };
    operation.document = document;
    operation.definition = document.definitions[0] as OperationDefinitionNode;
    if (!isPrepared(operation)) throw new Error('not prepared');
    const resolutions = new EventResolutions({ eventConcurrency: 4, eventConcurrencyPerCaller: 4 });
    resolutions.enterThrough({
      operation: (event) => {
        event.result = { data: { headChanged: { id: event.event!.change.eventId } } };
      },
      finish: () => undefined,
    });
    return { operation, resolutions };
  }
  const metrics = () => new RealTimeMetrics(new Registry());

  it('two next() at once each settle with a result of their own; return() while one waits settles it done and ends its source', async () => {
    const { state, listen } = listener();
    const { operation, resolutions } = subscription();
    const source = changeQueue(listen, 'h', { onFinish: () => undefined, onFolded: () => undefined });
    const stream = subscriberStream(operation, source, { resolutions, metrics: metrics(), stopping: () => false });
    const [first, second] = [stream.next(), stream.next()];
    await new Promise((resolve) => setImmediate(resolve));
    state.onChange!(change(1));
    await new Promise((resolve) => setImmediate(resolve));
    // Made after the first resolution started (a change made before it would take that one: event-resolutions.ts).
    state.onChange!(change(2, { at: Date.now() + 1_000 }));
    const ids = [(await first).value, (await second).value].map(
      (result) => ((result as ExecutionResult).data as { headChanged: { id: string } }).headChanged.id,
    );
    expect(ids).toHaveLength(2);
    expect(ids[0]).toMatch(/-1$/);
    expect(ids[1]).toMatch(/-2$/);
    const waiting = stream.next();
    await stream.return!(undefined);
    expect(await waiting).toEqual({ done: true, value: undefined });
    await new Promise((resolve) => setImmediate(resolve));
    expect(state.listening).toBe(false);
  });

  it('kept for changes that come late, bounded by bytes: after 40 keys of 1 MB results the first key’s is gone, and a late change resolves anew', async () => {
    const { operation, resolutions } = subscription();
    let runs = 0;
    const big = 'x'.repeat(1024 * 1024);
    resolutions.enterThrough({
      operation: (event) => {
        runs++;
        event.result = { data: { headChanged: { id: big } } };
      },
      finish: () => undefined,
    });
    await resolutions.of(change(1), operation, 'key-0');
    // The same key, a change made before that resolution started: the kept one answers it.
    await resolutions.of(change(2, { at: 0 }), operation, 'key-0');
    expect(runs).toBe(1);
    for (let key = 1; key <= 40; key++) await resolutions.of(change(2 + key), operation, `key-${key}`);
    expect(runs).toBe(41);
    // 41 MB of results outweigh the bound: key-0's was let go, so the late change is resolved again.
    await resolutions.of(change(50, { at: 0 }), operation, 'key-0');
    expect(runs).toBe(42);
  });
});
