import { stopAll, wasInterrupted } from './processes.js';

/** A bad command line: reported with the usage, exit code 2. */
export class UsageError extends Error {}

/** An integer option within [min, max], or a UsageError naming it. */
export function integerOption(name: string, value: string, min: number, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new UsageError(`--${name}: expected an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return n;
}

/** `--help`: the usage, and nothing else. */
export function exitWithHelp(help: boolean | undefined, usage: string): void {
  if (!help) return;
  console.log(usage);
  process.exit(0);
}

/** Runs a bench, then stops its child processes whatever happened. */
export async function runBench(main: () => Promise<void>, usage: string): Promise<void> {
  try {
    await main();
    await stopAll();
  } catch (error) {
    // After Ctrl-C the killed children make the run fail; the signal handler reports and exits.
    if (wasInterrupted()) await new Promise(() => {});
    // node:util's parseArgs throws on an unknown option or a missing value: the user's mistake too.
    const misused =
      error instanceof UsageError || String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');
    console.error(misused ? `${(error as Error).message}\n${usage}` : error);
    await stopAll();
    process.exitCode = misused ? 2 : 1;
  }
}
