import type { ExecutionResult } from 'graphql';
import { LRUCache } from 'lru-cache';
import pLimit, { type LimitFunction } from 'p-limit';
import type { HeadChange } from '../../domain/head-changes.js';
import type { Negotiated } from '../incoming.js';
import { OperationState, type PreparedOperationState } from '../operation-state.js';
import type { MaybePromise } from '../pipeline/stages.js';
import { eventIdOf, type RequestState } from '../request-state.js';

/** The pipeline's entry at the document stage, and what a transport calls once an operation's results are out. */
export interface OperationEntry {
  operation(operation: OperationState): MaybePromise<void>;
  finish(request: RequestState): void;
}

/** What a subscription's event is answered in: one result, a part of its subscription's stream. */
const oneResult: Negotiated = Object.freeze({
  whole: 'application/json',
  parts: undefined,
  alpha9: false,
  subscriptionSpec: false,
});

/** What subscribers share one resolution of an event by: the same token, document and variables read the same. */
export function sharingKey(operation: PreparedOperationState): string {
  const { request, params } = operation;
  return `${request.tokenCaller ?? ''}\n${params.operationName ?? ''}\n${JSON.stringify(params.variables ?? {})}\n${operation.prepared.text}`;
}

/** The heads an operation read that exist (what a live query watches): those read, less those found gone (404). */
export function headsRead(operation: OperationState): readonly string[] {
  const heads = operation.context?.loaders.heads;
  if (heads === undefined) return [];
  const gone = new Set(heads.gone());
  return heads.ids().filter((id) => !gone.has(id));
}

/** An event's result for a sharing key, its JSON (what a polled change is compared by), and the heads it read. */
export interface Resolved {
  readonly result: ExecutionResult;
  readonly json: string;
  readonly heads: readonly string[];
}

/**
 * Resolves `change` for `subscription`'s subscribers: the gateway's own operation on their behalf (their token and
 * prepared document, one result), entering at the document stage, where only the policies that concern events meet it.
 * No caller's window is charged. A refusal (OVERLOADED) or a failure is its result: an event with its code.
 */
async function resolveEvent(entry: OperationEntry, subscription: PreparedOperationState, change: HeadChange) {
  const { request, prepared, definition, params } = subscription;
  const own = request.onBehalf({
    carries: oneResult,
    requestId: request.requestId,
    parent: subscription.record?.trace,
    client: request.client,
  });
  const operation = new OperationState(params, own, 'object', {
    change,
    prepared,
    document: prepared.plain,
    definition,
  });
  try {
    await entry.operation(operation);
    return { result: operation.result as ExecutionResult, heads: headsRead(operation) };
  } finally {
    entry.finish(own);
  }
}

/** At most `eventConcurrency` events resolved at once in the process, `eventConcurrencyPerCaller` of one caller's. */
export interface EventConcurrency {
  readonly eventConcurrency: number;
  readonly eventConcurrencyPerCaller: number;
}

/** A sharing key's latest resolution: started (at `startedAt`), or waiting for its turn (then it reads the head). */
interface Latest {
  readonly turn: {
    startedAt: number | undefined;
    /** The event id of the newest change it answers: the last that joined it before it started. */
    eventId: string;
  };
  /** Whether it answers a deletion (whose event reads nothing): only such a change takes it. */
  readonly deleted: boolean;
  readonly resolved: Promise<Resolved>;
}

/** Sharing keys whose latest resolution is kept, and the bytes of their results once done (one while under way). */
const LATEST_KEPT = 10_000;
const LATEST_BYTES = 32 * 1024 * 1024;

function getOrMake<K, V>(map: { get(k: K): V | undefined; set(k: K, v: V): unknown }, key: K, make: () => V): V {
  const value = map.get(key);
  if (value !== undefined) return value;
  const made = make();
  map.set(key, made);
  return made;
}

/**
 * Each event resolved once per sharing key: N subscribers cost one upstream read per event. A change that comes while
 * its key's resolution waits, or after one started later than the change was made, takes that one (it reads the head
 * as it is then), so a burst of writes costs one read. Turns are bounded in all and per caller, so a write's fan-out
 * never takes the upstream pool, and one caller's many never hold the others' back.
 */
export class EventResolutions {
  /** Each event's resolution per sharing key, while a subscriber's queue or stream holds the change. */
  readonly #resolved = new WeakMap<HeadChange, Map<string, Promise<Resolved>>>();
  readonly #latest = new LRUCache<string, Latest>({
    max: LATEST_KEPT,
    maxSize: LATEST_BYTES,
    sizeCalculation: () => 1,
  });
  readonly #turns: LimitFunction;
  /** Each caller's turns, while it has events waiting or under way. */
  readonly #callers = new Map<string, LimitFunction>();
  #entry: OperationEntry | undefined;

  constructor(private readonly limits: EventConcurrency) {
    this.#turns = pLimit(limits.eventConcurrency);
  }

  /** Where events enter the one path: the pipeline, made once the policies that hold this are (gateway.ts). */
  enterThrough(entry: OperationEntry): void {
    this.#entry = entry;
  }

  of(change: HeadChange, operation: PreparedOperationState, key: string): Promise<Resolved> {
    const byKey = getOrMake(this.#resolved, change, () => new Map<string, Promise<Resolved>>());
    return getOrMake(byKey, key, () => this.#fresh(change, operation, key));
  }

  /** A resolution of `key` that answers `change`: one that waits or started after it was made, else a new one. */
  #fresh(change: HeadChange, operation: PreparedOperationState, key: string): Promise<Resolved> {
    const deleted = change.deleted === true;
    const latest = this.#latest.get(key);
    if (latest !== undefined && latest.deleted === deleted) {
      const { turn } = latest;
      if (turn.startedAt === undefined) {
        turn.eventId = change.eventId;
        return latest.resolved;
      }
      if (turn.startedAt >= change.at) return latest.resolved;
    }
    const caller = operation.request.caller.key;
    const callerTurns = getOrMake(this.#callers, caller, () => pLimit(this.limits.eventConcurrencyPerCaller));
    const turn: Latest['turn'] = { startedAt: undefined, eventId: change.eventId };
    const run = async (): Promise<Resolved> => {
      turn.startedAt = Date.now();
      const { result, heads } = await resolveEvent(this.#entry!, operation, change);
      const json = JSON.stringify(result);
      // Its SSE id, the same for every subscriber: one object for all, framed once per transport (answers/parts.ts).
      (result as { [eventIdOf]?: string })[eventIdOf] = turn.eventId;
      return { result, json, heads };
    };
    const resolved = callerTurns(() => this.#turns(run)).finally(() => {
      if (callerTurns.activeCount === 0 && callerTurns.pendingCount === 0) this.#callers.delete(caller);
    });
    const entry: Latest = { turn, deleted, resolved };
    this.#latest.set(key, entry);
    resolved.then(
      ({ json }) => {
        // Done, it weighs its result; a new object, as lru-cache keeps the size it had for the same value set again.
        if (this.#latest.peek(key) === entry) this.#latest.set(key, { ...entry }, { size: Math.max(json.length, 1) });
      },
      () => undefined,
    );
    return resolved;
  }
}
