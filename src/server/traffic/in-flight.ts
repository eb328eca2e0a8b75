import type { IntakeStep, OperationStep, TelemetryStep } from '../pipeline/stages.js';
import type { LoadShedder, OverloadReason } from './load-shedder.js';

/**
 * The one count of operations in flight, process-wide (`LoadShedder.inFlight`, with who holds
 * them): what SHED_MAX_IN_FLIGHT caps and `gateway_operations_in_flight` shows. A request's
 * operations are counted from its arrival until its answer is out: a batch's each, an
 * @defer/@stream one until its last part is out or its client hangs up (the telemetry stage runs
 * then, on every transport).
 *
 * Overload is refused here, the intake stage's first step, before the body is read or anything
 * runs: 503, `Retry-After` and code OVERLOADED (its `x-request-id` written by the answer stage as
 * every answer's), told to `onRefused` with the reason and the request's id (the log: overload-log.ts).
 */
export function useInFlight(shedder: LoadShedder, onRefused?: (reason: OverloadReason, requestId: string) => void): { readonly intake: IntakeStep; readonly document: OperationStep; readonly telemetry: TelemetryStep } {
  return {
    intake(request) {
      const reason = shedder.refusal(request.caller);
      if (reason !== undefined) {
        onRefused?.(reason, request.requestId);
        return shedder.overloaded();
      }
      shedder.hold(request.caller);
      request.held = 1;
      return undefined;
    },
    // The first operation takes the unit its request was admitted with; a batch's others add theirs.
    document(operation) {
      const { request } = operation;
      if (request.held === 0 || request.operations[0] === operation) return undefined;
      shedder.hold(request.caller);
      request.held++;
      return undefined;
    },
    telemetry(request) {
      if (request.held > 0) shedder.release(request.caller, request.held);
      request.held = 0;
    },
  };
}
