import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

/*
 * `npm run profile:summary -- <file.cpuprofile> [--window 8] [--top 25]`: where a gateway's CPU
 * went, from a profile written by `node --cpu-prof`, for instance by
 *   GATEWAY_NODE_FLAGS="--cpu-prof --cpu-prof-dir=bench/results/profiles" npm run bench -- --only Q1 --cores one
 * (the gateway writes it when the bench stops it). Self time by package and by function, over
 * the last `--window` seconds before the profile ended: the last scenario's measured phase, not
 * start-up or warm-up.
 */

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    window: { type: 'string', default: '8' },
    top: { type: 'string', default: '25' },
    skip: { type: 'string', default: '0.3' },
  },
});
if (positionals.length !== 1) {
  console.error('Usage: npm run profile:summary -- <file.cpuprofile> [--window 8] [--top 25] [--skip 0.3]');
  process.exit(2);
}

const profile = JSON.parse(readFileSync(positionals[0]!, 'utf8')) as CpuProfile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
// The window ends a little before the profile does: stopping the gateway is not load.
const end = profile.endTime - Number(values.skip) * 1e6;
const start = end - Number(values.window) * 1e6;

/** `react` for node_modules/react/..., `@scope/name` for scoped packages, `src` for ours, else V8's label. */
function packageOf(frame: CallFrame): string {
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(frame.url);
  if (match) return match[1]!;
  if (/\/(?:dist|src)\//.test(frame.url)) return 'gateway (ours)';
  if (frame.url.startsWith('node:')) return frame.url.replace(/^node:(?:internal\/)?/, 'node:');
  return frame.url || frame.functionName;
}

const functionOf = (frame: CallFrame) =>
  `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(?=dist\/|src\/)/, '')}:${frame.lineNumber + 1}`;

const bySelf = { package: new Map<string, number>(), function: new Map<string, number>() };
let total = 0;
let time = profile.startTime;
for (let i = 0; i < profile.samples.length; i++) {
  time += profile.timeDeltas[i] ?? 0;
  if (time < start || time > end) continue;
  // A sample's weight is the time until the next one.
  const weight = profile.timeDeltas[i + 1] ?? 0;
  const frame = byId.get(profile.samples[i]!)!.callFrame;
  total += weight;
  const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + weight);
  add(bySelf.package, packageOf(frame));
  add(bySelf.function, functionOf(frame));
}

const top = Number(values.top);
const rows = (map: Map<string, number>) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([key, weight]) => `${((100 * weight) / total).toFixed(1).padStart(5)} %  ${key}`);
console.log(
  `${(total / 1e6).toFixed(2)} s sampled (the last ${values.window} s)\n\nSelf time by package:\n${rows(bySelf.package).join('\n')}`,
);
console.log(`\nSelf time by function:\n${rows(bySelf.function).join('\n')}`);
