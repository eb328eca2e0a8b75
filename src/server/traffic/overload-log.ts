import type { Logger } from 'pino';
import type { OverloadReason } from './load-shedder.js';

/** How often a reason of overload refusals gets a line at most. */
const LINE_EVERY_MS = 1_000;

/**
 * The log of OVERLOADED refusals: at most one line per reason a second, with how many were
 * refused for it since the last and the request id of the last of them (its answer's
 * `x-request-id`), so an operator can tell refusals apart and find one. The first refusal after
 * a quiet second waits that second for its line, so a burst is one line.
 */
export function overloadLog(logger: Logger): (reason: OverloadReason, requestId: string) => void {
  const pending = new Map<OverloadReason, { refused: number; requestId: string }>();
  let flushing = false;
  const flush = () => {
    flushing = false;
    for (const [reason, { refused, requestId }] of pending)
      logger.warn({ reason, refused, requestId }, 'operations refused: the gateway is overloaded');
    pending.clear();
  };
  return (reason, requestId) => {
    const known = pending.get(reason);
    pending.set(reason, { refused: (known?.refused ?? 0) + 1, requestId });
    if (flushing) return;
    flushing = true;
    setTimeout(flush, LINE_EVERY_MS).unref();
  };
}
