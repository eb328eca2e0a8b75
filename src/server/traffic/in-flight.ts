import type { Caller } from '../callers.js';
import type { OperationState } from '../operation-state.js';
import type { OperationStep, Policy } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import type { LoadShedder, OverloadReason } from './load-shedder.js';

/** Told of each refusal for overload, with its reason and its request's id (the log: overload-log.ts). */
export type OverloadRefused = (reason: OverloadReason, requestId: string) => void;

/** Gives back the unit in flight an operation holds, once. */
function giveBack(shedder: LoadShedder, operation: OperationState, caller: Caller): void {
  if (!operation.held) return;
  operation.held = false;
  shedder.release(caller);
}

/**
 * The one count of operations in flight, process-wide (`LoadShedder.inFlight`, with who holds
 * them): what SHED_MAX_IN_FLIGHT caps and `gateway_operations_in_flight` shows. An operation is
 * counted as its document stage begins (an HTTP request's once its body is read: a request still
 * sending it holds nothing, so connections that send half a body and wait cost no one else a
 * place) until its results are out: an @defer/@stream one until its last part is out or its
 * client hangs up; a subscription's stream holds nothing once it begins (its result step gives the
 * unit back then), its events counting as their own (`useEventsInFlight`).
 *
 * Overload is refused before anything runs: as an HTTP request arrives (the intake's first step,
 * before its body is read: a refusal costs no more than itself), and as each operation is counted
 * (the load may have changed meanwhile). 503, `Retry-After` and code OVERLOADED, told to
 * `onRefused` with the reason and the request's id.
 */
export function useInFlight(shedder: LoadShedder, onRefused?: OverloadRefused): Policy {
  const refused = (request: RequestState) => {
    const reason = shedder.refusal(request.caller);
    if (reason === undefined) return undefined;
    onRefused?.(reason, request.requestId);
    return shedder.overloaded();
  };
  const counted: OperationStep = (operation) => {
    const { request } = operation;
    const refusal = refused(request);
    if (refusal !== undefined) return refusal;
    shedder.hold(request.caller);
    operation.held = true;
    return undefined;
  };
  return {
    name: 'in flight',
    intake: refused,
    document: counted,
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
 * A subscription's events in flight: each event's resolution holds a unit while it reads, in the
 * one count, as the class `events` (nobody's request: a write is not its subscribers' request).
 * They are shed as a class, before any client's operation: while the gateway is overloaded for any
 * reason every event is refused OVERLOADED (its subscribers told so in an event of their stream,
 * which goes on), where a client's operation is refused only at its caller's share.
 */
export function useEventsInFlight(shedder: LoadShedder, onRefused?: OverloadRefused): Policy {
  const counted = (operation: OperationState) => {
    const reason = shedder.eventRefusal();
    if (reason !== undefined) {
      onRefused?.(reason, operation.request.requestId);
      return shedder.overloaded();
    }
    shedder.hold(eventsCaller);
    operation.held = true;
    return undefined;
  };
  return {
    name: 'events in flight',
    concerns: 'events only',
    document: counted,
    release: (request) => {
      for (const operation of request.operations) giveBack(shedder, operation, eventsCaller);
    },
  };
}
