/** The median of some numbers. */
export const median = (values: readonly number[]): number =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Milliseconds `probe` takes, started together with `beside` (which runs alongside, not awaited in the timing). */
async function timedBeside(probe: () => Promise<unknown>, beside: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  const [elapsed] = await Promise.all([probe().then(() => performance.now() - started), beside()]);
  return elapsed;
}

/**
 * How much longer `probe` takes beside `load` than beside `baseline`, as a ratio of medians over
 * `rounds` alternating rounds (after one warm-up of each). A ratio, not a time: the machine may be
 * shared and loaded, which slows both sides alike.
 */
export async function slowdown(
  probe: () => Promise<unknown>,
  load: () => Promise<unknown>,
  baseline: () => Promise<unknown>,
  rounds = 7,
): Promise<number> {
  await timedBeside(probe, load);
  await timedBeside(probe, baseline);
  const loaded: number[] = [];
  const plain: number[] = [];
  for (let i = 0; i < rounds; i++) {
    loaded.push(await timedBeside(probe, load));
    plain.push(await timedBeside(probe, baseline));
  }
  return median(loaded) / median(plain);
}
