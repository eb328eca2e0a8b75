import type { ExecutionResult } from 'graphql';
import type { HeadChange } from '../../domain/head-changes.js';
import type { MaybePromise } from '../pipeline/stages.js';
import { eventIdOf, OperationState, type Negotiated, type RequestState } from '../request-state.js';

/** Where an operation enters the one path at the document stage, and what its transport calls once its results are out (the pipeline's). */
export interface OperationEntry {
  operation(operation: OperationState): MaybePromise<void>;
  finish(request: RequestState): void;
}

/** What a subscription's event is answered in: one result, a part of its subscription's stream. */
const oneResult: Negotiated = Object.freeze({ whole: 'application/json', parts: undefined, alpha9: false, subscriptionSpec: false });

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

/** An event's result for a sharing key, its JSON (what a polled change is compared by), and the heads it read (what a live query watches). */
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
async function resolveEvent(entry: OperationEntry, subscription: OperationState, change: HeadChange): Promise<{ result: ExecutionResult; heads: readonly string[] }> {
  const { request, prepared, definition } = subscription;
  const own = request.onBehalf({ carries: oneResult, requestId: request.requestId, parent: subscription.record?.trace, client: request.client });
  const operation = new OperationState(subscription.params, own, 'object', { change, prepared: prepared!, document: prepared!.whole, definition: definition! });
  try {
    await entry.operation(operation);
    return { result: operation.result as ExecutionResult, heads: headsRead(operation) };
  } finally {
    entry.finish(own);
  }
}

/**
 * Each event resolved once per sharing key (token, document, variables): N subscribers sharing one
 * cost one upstream read per event, and none of them is charged for it.
 */
export class EventResolutions {
  /** Each event's resolution per sharing key, while the change is held by a subscriber's queue or stream. */
  readonly #resolved = new WeakMap<HeadChange, Map<string, Promise<Resolved>>>();
  #entry: OperationEntry | undefined;

  /** Where events enter the one path: the pipeline, made once the policies that hold this are (gateway.ts). */
  enterThrough(entry: OperationEntry): void {
    this.#entry = entry;
  }

  /** The result of `change` for `operation`'s subscribers (sharing `key`). */
  of(change: HeadChange, operation: OperationState, key: string): Promise<Resolved> {
    let byKey = this.#resolved.get(change);
    if (byKey === undefined) this.#resolved.set(change, (byKey = new Map()));
    let resolved = byKey.get(key);
    if (resolved === undefined) {
      resolved = resolveEvent(this.#entry!, operation, change).then(({ result, heads }) => {
        const json = JSON.stringify(result);
        // Its SSE id, the same for every subscriber it goes to: one object for all, framed once for each transport (answers/parts.ts).
        (result as { [eventIdOf]?: string })[eventIdOf] = change.eventId;
        return { result, json, heads };
      });
      byKey.set(key, resolved);
    }
    return resolved;
  }
}
