import { afterEach, describe, expect, it, vi } from 'vitest';
import type { gatewayPolicies } from '../src/server/policies.js';
import { compare, type Side, startSide } from './support/differential.js';

/*
 * The differential test (test/differential.test.ts) must fail when a stage's step is left out of
 * either case: here one side is built with one step of the one path taken away (its policy's step
 * undefined, as a policy that is off leaves it), the other whole, and the comparison of a few
 * generated requests must find the send that differs: steps of the document, execution and answer
 * stages, each left out of one side or the other. (A step whose work no answer shows, such as the
 * intake's telemetry starting its clock, is held by its own tests; the intake's 406 to an Accept
 * the gateway has no type for is given again by the answer stage, so leaving it out changes
 * nothing a client sees.)
 */

type Policies = ReturnType<typeof gatewayPolicies>;

/** What the next gateway built is given instead of its policies: one step taken out. */
const sabotage = vi.hoisted(() => ({ current: undefined as ((policies: Policies) => Policies) | undefined }));

vi.mock('../src/server/policies.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../src/server/policies.js')>();
  return {
    ...real,
    gatewayPolicies: (options: Parameters<typeof real.gatewayPolicies>[0]) => {
      const policies = real.gatewayPolicies(options);
      return sabotage.current === undefined ? policies : sabotage.current(policies);
    },
  };
});

const sabotages: [string, Side['name'], (policies: Policies) => Policies][] = [
  ["the result stage's masking", 'compiled', (p) => ({ ...p, masking: { ...p.masking, result: undefined } })],
  [
    "the document stage's validation",
    'interpreted',
    (p) => ({ ...p, documents: { ...p.documents, document: p.documents.parse } }),
  ],
  [
    "the answer stage's telemetry (the x-request-id header's writer)",
    'interpreted',
    (p) => ({ ...p, telemetry: { ...p.telemetry, answer: undefined } }),
  ],
  [
    "the answer stage's cache headers",
    'compiled',
    (p) => ({ ...p, cacheHeaders: { ...p.cacheHeaders, answer: undefined } }),
  ],
];

describe('the differential test, with one step left out of one side', () => {
  const opened: Side[] = [];
  afterEach(async () => {
    sabotage.current = undefined;
    await Promise.all(opened.splice(0).map((side) => side.t.close()));
  });

  it.each(sabotages)('finds %s left out of the %s side', async (_step, sabotaged, leaveOut) => {
    const sides = {} as Record<Side['name'], Side>;
    for (const name of ['compiled', 'interpreted'] as const) {
      sabotage.current = name === sabotaged ? leaveOut : undefined;
      const env: Record<string, string> =
        name === 'compiled'
          ? { COMPILED_EXECUTION: 'on', COMPILED_EXECUTION_AT_RUN: '2' }
          : { COMPILED_EXECUTION: 'off' };
      sides[name] = await startSide(name, env);
      opened.push(sides[name]);
    }
    sabotage.current = undefined;
    const failure = await compare(sides.compiled, sides.interpreted, {
      seed: 20_260_529,
      runs: 40,
      shrink: false,
    }).then(
      () => undefined,
      (error: Error) => error,
    );
    // fast-check's report, the send that differed as its cause.
    expect(failure, 'the comparison found no difference').toBeInstanceOf(Error);
    expect((failure!.cause as Error | undefined)?.message).toMatch(/^send \d of \d differs/);
  });
});
