import { describe, expect, it } from 'vitest';
import { type BenchReport, type Measurement, type ScenarioResult, summarize, toMarkdown } from '../report.js';

/* The bench's arithmetic and report, on made-up measurements: medians, spreads, both tables. */

const measurement = (reqPerSec: number, p99Ms: number, rssMb: number, ratio?: number): Measurement => ({
  reqPerSec,
  p50Ms: 1,
  p99Ms,
  requests: reqPerSec * 5,
  non2xx: 0,
  errors: 0,
  callsPerOp: 1,
  upstreamCalls: { getHeadById: reqPerSec * 5 },
  rssBytes: rssMb * 1024 * 1024,
  ratio,
});

const scenario = (name: string, rounds: Measurement[]): ScenarioResult => ({
  name,
  description: `${name} scenario`,
  check: 'ok',
  rounds,
});

function report(cores: 'one' | 'all' | 'both'): BenchReport {
  const oneCore = [
    scenario('direct', [
      measurement(20_000, 1, 100, 1),
      measurement(24_000, 1, 100, 1),
      measurement(22_000, 2, 100, 1),
    ]),
    scenario('Q1', [
      measurement(3_000, 9, 130, 0.15),
      measurement(3_300, 6, 134, 0.1375),
      measurement(2_900, 7, 132, 0.1318),
    ]),
  ];
  const allCores = [
    scenario('direct', [measurement(24_000, 1, 260, 1)]),
    scenario('Q1', [measurement(4_200, 11, 320, 0.175)]),
  ];
  summarize(oneCore);
  summarize(allCores);
  return {
    meta: {
      startedAt: '2026-11-21T00:00:00Z',
      finishedAt: '2026-11-21T00:05:00Z',
      git: 'abc1234',
      node: 'v20.20.2',
      cpu: 'test CPU',
      cpus: 2,
      pinning: 'taskset: gateway on CPU 0, upstream + autocannon on CPU 1',
      cores,
      connections: 16,
      warmupSec: 3,
      durationSec: 5,
      rounds: 3,
      workers: undefined,
      gatewayCommand: 'node dist/main.js',
      gatewayEnv: { NODE_ENV: 'production' },
      rssSource: '/proc/<pid>/status VmRSS',
      gatewayLogLines: 0,
      gatewayLogSamples: [],
    },
    scenarios: cores === 'all' ? [] : oneCore,
    rss:
      cores === 'all'
        ? { afterRound1: undefined, afterLastRound: undefined }
        : { afterRound1: 134.8 * 1024 * 1024, afterLastRound: 133 * 1024 * 1024 },
    ...(cores === 'one'
      ? {}
      : {
          allCores: {
            workers: 2,
            pinning: 'not pinned',
            scenarios: allCores,
            rssAfterRun: 338 * 1024 * 1024,
            gatewayLogLines: 0,
            gatewayLogSamples: [],
          },
        }),
  };
}

describe('bench report', () => {
  it('takes medians and min–max over rounds', () => {
    const q1 = report('one').scenarios[1]!;
    expect(q1.summary?.reqPerSec).toEqual({ median: 3_000, min: 2_900, max: 3_300 });
    expect(q1.summary?.p99Ms).toEqual({ median: 7, min: 6, max: 9 });
    expect(q1.summary?.ratio?.median).toBe(0.1375);
    expect(q1.totals).toEqual({ requests: 46_000, non2xx: 0, errors: 0 });
  });

  it('renders the one-core table with the RSS of round 1 and of the last round, then the all-cores table', () => {
    const markdown = toMarkdown(report('both'));
    expect(markdown).toContain('3 round(s) on one core + 1 round on all cores');
    expect(markdown).toContain(
      '| Q1 | 3000 (2900–3300) | 1 | 7 (6–9) | 1 | 0.138 (0.132–0.15) | 132 (130–134) | 0 / 0 | ok |',
    );
    expect(markdown).toContain('Gateway RSS after round 1: 134.8 MB; after round 3: 133.0 MB (-1.8 MB).');
    const allCores = markdown.slice(markdown.indexOf('## All cores (WORKERS=auto, 2 workers, not pinned)'));
    expect(allCores).toContain('| Q1 | 4200 | 1 | 11 | 1 | 0.175 | 320 | 0 / 0 | ok |');
    expect(allCores).toContain('Gateway RSS (primary + workers) after the run: 338.0 MB.');
    expect(markdown.indexOf('## One core')).toBeLessThan(markdown.indexOf('## All cores'));
  });

  it('--cores one has no all-cores table, --cores all no one-core table', () => {
    expect(toMarkdown(report('one'))).not.toContain('## All cores');
    const allOnly = toMarkdown(report('all'));
    expect(allOnly).not.toContain('## One core');
    expect(allOnly).toContain('- **Q1**: Q1 scenario');
  });
});
