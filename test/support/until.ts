import { setTimeout as sleep } from 'node:timers/promises';

/** The real clock, taken before any test can fake `performance`. */
const now = performance.now.bind(performance);

/**
 * Waits until `condition` holds: a barrier on something the test can observe (requests in flight
 * at the reference upstream, a log line, a refused connection) instead of a guess of how long it
 * takes. It polls on Node's own timers and the real clock, so fake timers do not stop it. `limitMs` only turns a
 * condition that never comes into a failure naming it, before the test's own timeout. `everyMs`:
 * the pause between polls, longer for a condition that costs something to ask (a Redis command
 * to several nodes, a scrape).
 */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what = 'the condition',
  limitMs = 10_000,
  everyMs = 2,
): Promise<void> {
  const giveUpAt = now() + limitMs;
  while (!(await condition())) {
    if (now() > giveUpAt) throw new Error(`${what}: not met within ${limitMs} ms`);
    await sleep(everyMs);
  }
}
