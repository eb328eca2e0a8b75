import type { ExecutionResult } from 'graphql';
import { LRUCache } from 'lru-cache';
import pLimit, { type LimitFunction } from 'p-limit';
import type { HeadChange } from '../../domain/head-changes.js';
import type { Negotiated } from '../incoming.js';
import { OperationState } from '../operation-state.js';
import type { MaybePromise } from '../pipeline/stages.js';
import { eventIdOf, type RequestState } from '../request-state.js';

/**
 * Where an operation enters the one path at the document stage, and what its transport calls once its results are out
 * (the pipeline's).
 */
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
export function sharingKey(operation: OperationState): string {
  const { request, params } = operation;
  return `${request.tokenCaller ?? ''}\n${params.operationName ?? ''}\n${JSON.stringify(params.variables ?? {})}\n${operation.prepared!.text}`;
}

/** The heads an operation read that exist (what a live query watches): those read, less those found gone (404). */
export function headsRead(operation: OperationState): readonly string[] {
  const heads = operation.context?.loaders.heads;
  if (heads === undefined) return [];
  const gone = new Set(heads.gone());
  return heads.ids().filter((id) => !gone.has(id));
}

/**
 * An event's result for a sharing key, its JSON (what a polled change is compared by), and the heads it read (what a
 * live query watches).
 */
export interface Resolved {
  readonly result: ExecutionResult;
  readonly json: string;
  readonly heads: readonly string[];
}

/**
 * Resolves `change` for `subscription`'s subscribers: an operation of the gateway's own on their
 * behalf (their token, their document as their subscription prepared it, answered in one result),
 * entering the one path at the document stage, where only the policies that concern events meet
 * it: its span (under the subscription's, linked to the write or poll that caused it), its unit in
 * flight (shed as a class, before any client's operation), its plan and execution, its masking.
 * Nobody's request: no caller's window is charged, no subscriber's limit refuses it. A refusal
 * (OVERLOADED) or a failure is its result: an event with its code, the stream going on.
 */
async function resolveEvent(
  entry: OperationEntry,
  subscription: OperationState,
  change: HeadChange,
): Promise<{ result: ExecutionResult; heads: readonly string[] }> {
  const { request, prepared, definition } = subscription;
  const own = request.onBehalf({
    carries: oneResult,
    requestId: request.requestId,
    parent: subscription.record?.trace,
    client: request.client,
  });
  const operation = new OperationState(subscription.params, own, 'object', {
    change,
    prepared: prepared!,
    document: prepared!.plain,
    definition: definition!,
  });
  try {
    await entry.operation(operation);
    return { result: operation.result as ExecutionResult, heads: headsRead(operation) };
  } finally {
    entry.finish(own);
  }
}

/**
 * How events wait for their turn: at most `concurrency` resolved at once in the process, `perCaller` of one caller's.
 */
export interface EventConcurrency {
  readonly eventConcurrency: number;
  readonly eventConcurrencyPerCaller: number;
}

/**
 * Where a resolution of one sharing key is: started (at its time), or waiting for its turn (it will read whatever is
 * there then).
 */
interface Turn {
  startedAt: number | undefined;
  /** The event id of the newest change it answers: the last that joined it before it started. */
  eventId: string;
}

/** The latest resolution of one sharing key. */
interface Latest {
  readonly turn: Turn;
  /**
   * Whether it answers a deletion (a subscription's event on a deletion reads nothing): only such a change takes it.
   */
  readonly deleted: boolean;
  readonly resolved: Promise<Resolved>;
}

/** Sharing keys whose latest resolution is kept for changes that come while it waits or just after it started. */
const LATEST_KEPT = 10_000;
/**
 * The bytes of the results those resolutions hold once done, all keys together (a waiting or running one counts one
 * byte): the keys of subscriptions gone since are dropped first.
 */
const LATEST_BYTES = 32 * 1024 * 1024;

/**
 * Each event resolved once per sharing key (token, document, variables): N subscribers sharing one
 * cost one upstream read per event, and none of them is charged for it. A change that comes while a
 * resolution of its key waits for its turn, or after one started later than the change was made,
 * takes that one (it reads the head as it is then): a burst of writes, or one write told to many
 * live queries of the same caller, costs one read. Resolutions take turns (p-limit): at most
 * SUBSCRIPTION_EVENT_CONCURRENCY at once, SUBSCRIPTION_EVENT_CONCURRENCY_PER_CALLER of one caller's,
 * so a write's fan-out to many live queries never takes the upstream pool, and one caller's many
 * never hold the others' back.
 */
export class EventResolutions {
  /** Each event's resolution per sharing key, while the change is held by a subscriber's queue or stream. */
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

  /** The result of `change` for `operation`'s subscribers (sharing `key`). */
  of(change: HeadChange, operation: OperationState, key: string): Promise<Resolved> {
    let byKey = this.#resolved.get(change);
    if (byKey === undefined) {
      byKey = new Map();
      this.#resolved.set(change, byKey);
    }
    let resolved = byKey.get(key);
    if (resolved === undefined) {
      resolved = this.#fresh(change, operation, key);
      byKey.set(key, resolved);
    }
    return resolved;
  }

  /**
   * A resolution of `key` that answers `change`: one that waits, or started after it was made, else a new one in its
   * turn.
   */
  #fresh(change: HeadChange, operation: OperationState, key: string): Promise<Resolved> {
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
    let own = this.#callers.get(caller);
    if (own === undefined) {
      own = pLimit(this.limits.eventConcurrencyPerCaller);
      this.#callers.set(caller, own);
    }
    const callerTurns = own;
    const turn: Turn = { startedAt: undefined, eventId: change.eventId };
    const run = async (): Promise<Resolved> => {
      turn.startedAt = Date.now();
      const { result, heads } = await resolveEvent(this.#entry!, operation, change);
      const json = JSON.stringify(result);
      // Its SSE id, the same for every subscriber it goes to: one object for all, framed once for each transport
      // (answers/parts.ts).
      (result as { [eventIdOf]?: string })[eventIdOf] = turn.eventId;
      return { result, json, heads };
    };
    const resolved = callerTurns(() => this.#turns(run)).finally(() => {
      if (callerTurns.activeCount === 0 && callerTurns.pendingCount === 0) this.#callers.delete(caller);
    });
    const entry: Latest = { turn, deleted, resolved };
    this.#latest.set(key, entry);
    // Done, it weighs its result: kept by bytes as well as by count.
    resolved.then(
      ({ json }) => {
        // A new object: lru-cache keeps the size it had for the same value set again.
        if (this.#latest.peek(key) === entry) this.#latest.set(key, { ...entry }, { size: Math.max(json.length, 1) });
      },
      () => undefined,
    );
    return resolved;
  }
}
