import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/*
 * What /proc says of a process the benches started: its resident memory (with its descendants: a
 * WORKERS=N gateway forks) and the CPU time it has used (every thread: the event loop, V8's
 * collector and compiler threads, libuv's pool).
 */

const readOrUndefined = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/** VmRSS of a process and its descendants, from /proc; undefined when there is no /proc entry. */
export function procRss(pid: number): number | undefined {
  const kb = readOrUndefined(`/proc/${pid}/status`)?.match(/^VmRSS:\s+(\d+) kB/m)?.[1];
  if (!kb) return undefined;
  let total = Number(kb) * 1024;
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      for (const kid of kids ? kids.split(' ') : []) total += procRss(Number(kid)) ?? 0;
    }
  } catch {
    // A thread or worker that ended while we read: count what is left.
  }
  return total;
}

let clockTicks: number | undefined;

/**
 * CPU seconds a process has used, user and system (utime + stime of /proc/<pid>/stat, in clock ticks of `getconf
 * CLK_TCK`), whatever else the machine does meanwhile.
 */
export function cpuSeconds(pid: number): number {
  clockTicks ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  // The fields after the command name (in parentheses, and it may hold spaces): utime and stime are the 12th and 13th.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}
