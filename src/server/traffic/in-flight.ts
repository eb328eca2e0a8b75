import type { IntakeStep, TelemetryStep } from '../pipeline/stages.js';
import type { RequestState } from '../request-state.js';
import type { LoadShedder, OverloadReason } from './load-shedder.js';

/**
 * The one count of operations in flight, process-wide (`LoadShedder.inFlight`, with who holds
 * them): what SHED_MAX_IN_FLIGHT caps and `gateway_operations_in_flight` shows. A request's
 * operations are counted once it has been sent whole (its body read, its operations made) until
 * its answer is out: a batch's each, an @defer/@stream one until its last part is out or its
 * client hangs up (the telemetry stage runs then, on every transport). A request still sending
 * its body holds nothing: connections that send half a body and wait cost no one else a place
 * (the HTTP server's REQUEST_TIMEOUT_MS ends them).
 *
 * Overload is refused twice, each time before anything runs: as the request arrives (the intake
 * stage's first step, before its body is read: a refusal costs no more than itself), and as it is
 * counted, its body in (the load may have changed while it came). 503, `Retry-After` and code
 * OVERLOADED (its `x-request-id` written by the answer stage as every answer's), told to
 * `onRefused` with the reason and the request's id (the log: overload-log.ts).
 */
export function useInFlight(shedder: LoadShedder, onRefused?: (reason: OverloadReason, requestId: string) => void): { readonly intake: IntakeStep; readonly sent: IntakeStep; readonly telemetry: TelemetryStep } {
  const refused = (request: RequestState) => {
    const reason = shedder.refusal(request.caller);
    if (reason === undefined) return undefined;
    onRefused?.(reason, request.requestId);
    return shedder.overloaded();
  };
  return {
    intake: refused,
    sent(request) {
      const refusal = refused(request);
      if (refusal !== undefined) return refusal;
      const operations = request.operations.length;
      shedder.hold(request.caller, operations);
      request.held = operations;
      return undefined;
    },
    telemetry(request) {
      if (request.held > 0) shedder.release(request.caller, request.held);
      request.held = 0;
    },
  };
}
