import type { Logger } from 'pino';
import type { OverloadReason } from './load-shedder.js';

const LINE_EVERY_MS = 1_000;

/**
 * OVERLOADED refusals, a line per reason a second at most: how many since the last, and the last one's request id
 * (`x-request-id`), so an operator can find one. The first after a quiet second waits it, so a burst is one line.
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
    pending.set(reason, { refused: (pending.get(reason)?.refused ?? 0) + 1, requestId });
    if (flushing) return;
    flushing = true;
    setTimeout(flush, LINE_EVERY_MS).unref();
  };
}
