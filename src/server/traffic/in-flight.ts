import type { Caller } from '../callers.js';
import type { OperationState } from '../operation-state.js';
import type { Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import type { LoadShedder, OverloadReason } from './load-shedder.js';

/** Told of each refusal for overload, with its reason and its request's id (the log: overload-log.ts). */
export type OverloadRefused = (reason: OverloadReason, requestId: string) => void;

/** The OVERLOADED refusal for `reason` (told to `onRefused`); none without a reason. */
function refuse(shedder: LoadShedder, requestId: string, reason?: OverloadReason, onRefused?: OverloadRefused) {
  if (reason === undefined) return undefined;
  onRefused?.(reason, requestId);
  return shedder.overloaded();
}

function hold(shedder: LoadShedder, operation: OperationState, caller: Caller): undefined {
  shedder.hold(caller);
  operation.held = true;
  return undefined;
}

function giveBack(shedder: LoadShedder, operation: OperationState, caller: Caller): void {
  if (!operation.held) return;
  operation.held = false;
  shedder.release(caller);
}

/**
 * The one count of operations in flight (`LoadShedder.inFlight`, what SHED_MAX_IN_FLIGHT caps), from the document
 * stage (half-sent bodies hold no place) until the results are out. Overload is refused as a request arrives (before
 * its body is read: a refusal costs no more than itself) and as each operation is counted (the load may have changed).
 */
export function useInFlight(shedder: LoadShedder, onRefused?: OverloadRefused): Policy {
  const refused = (request: RequestState) =>
    refuse(shedder, request.requestId, shedder.refusal(request.caller), onRefused);
  return {
    name: 'in flight',
    intake: refused,
    document: (operation) => refused(operation.request) ?? hold(shedder, operation, operation.request.caller),
    // An open stream (a subscription, a live query) holds nothing once it begins.
    result: (operation) => void (operation.streams && giveBack(shedder, operation, operation.request.caller)),
    release: (request) => {
      for (const operation of request.operations) giveBack(shedder, operation, request.caller);
    },
  };
}

/** Whom subscriptions' events are counted for: one class of their own, not their subscribers. */
const eventsCaller: Caller = { key: 'events', address: 'events', token: undefined, known: true };

/**
 * Each event's resolution holds a unit of the one count while it reads, as the class `events` (a write is not its
 * subscribers' request), shed first: while overloaded every event is refused, the stream going on.
 */
export function useEventsInFlight(shedder: LoadShedder, onRefused?: OverloadRefused): Policy {
  return {
    name: 'events in flight',
    concerns: 'events only',
    document: (operation) =>
      refuse(shedder, operation.request.requestId, shedder.eventRefusal(), onRefused) ??
      hold(shedder, operation, eventsCaller),
    release: (request) => {
      for (const operation of request.operations) giveBack(shedder, operation, eventsCaller);
    },
  };
}
