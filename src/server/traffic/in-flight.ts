import { isAsyncIterable, mapAsyncIterator, type Plugin } from 'graphql-yoga';
import type { ArrivingRequest } from '../callers.js';
import type { LoadShedder } from './load-shedder.js';
import { operationStateOf, requestStateOf, type OperationState } from '../request-state.js';

/**
 * The one count of operations in flight, process-wide (`LoadShedder.inFlight`, with who holds
 * them): what SHED_MAX_IN_FLIGHT caps and `gateway_operations_in_flight` shows. An operation is
 * counted from its request's arrival until its answer is out: a batch's operations each, an
 * @defer/@stream one until its last part is out, its client hangs up or its stream fails. A
 * caller's in-flight slot (traffic/caller-limits.ts) rides on the same ends: `slotBack` is told
 * once per slot.
 *
 * Overload is refused here, in onRequest, before the body is read or anything runs: 503,
 * `Retry-After` and code OVERLOADED. The HTTP server refuses most such requests before yoga (the
 * shedder's `refuseEarly`); this covers those it hands on (browsers, whose answer needs yoga's
 * CORS headers) and the gateway driven through `yoga.fetch`. The probes and pages have no request
 * state and are never refused.
 */
export function useInFlight(shedder: LoadShedder, slotBack?: (caller: string) => void): Plugin {
  const giveBackSlot = (operation: OperationState) => {
    const caller = operation.slot;
    if (caller === undefined) return;
    operation.slot = undefined;
    slotBack?.(caller);
  };
  return {
    onRequest({ serverContext, fetchAPI, endResponse }) {
      const state = requestStateOf(serverContext);
      if (state === undefined) return;
      // A fresh headers object: yoga's Node adapter writes content-length into the one it is given.
      if (!shedder.admit(state.callerOf((serverContext as { req?: ArrivingRequest }).req, shedder.trustProxy))) {
        return endResponse(new fetchAPI.Response(shedder.body, { status: 503, headers: { ...shedder.headers } }));
      }
      state.held = 1;
    },
    onParams({ context }) {
      const state = requestStateOf(context);
      const operation = operationStateOf(context);
      if (state === undefined || operation === undefined || state.held === 0) return;
      operation.inFlight = true;
      // The first operation takes the unit its request was admitted with; a batch's others add theirs.
      if (state.operations[0] === operation) return;
      shedder.hold(state.caller!);
      state.held++;
    },
    onExecutionResult({ result, setResult, context }) {
      const operation = operationStateOf(context);
      const state = requestStateOf(context);
      if (operation === undefined || state === undefined || !isAsyncIterable(result)) return;
      // Its end is the stream's: the last part taken, the stream cancelled (yoga stops it when the
      // client hangs up), or a part that fails (its `next()` rejects: a consumer need not cancel then).
      operation.streaming = true;
      let counted = operation.inFlight;
      if (counted) state.held--;
      const end = () => {
        if (counted) shedder.release(state.caller!);
        counted = false;
        giveBackSlot(operation);
      };
      const failed = (error: unknown) => {
        end();
        throw error;
      };
      setResult(mapAsyncIterator(result, (part) => part, failed, end));
    },
    onResponse({ serverContext }) {
      const state = requestStateOf(serverContext);
      if (state === undefined) return;
      if (state.held > 0) shedder.release(state.caller!, state.held);
      state.held = 0;
      for (const operation of state.operations) if (!operation.streaming) giveBackSlot(operation);
    },
  };
}
