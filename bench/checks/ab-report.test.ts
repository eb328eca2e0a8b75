import { describe, expect, it } from 'vitest';
import { combinePasses, compareRounds, describeComparison } from '../ab-report.js';

/* The A/B bench's arithmetic, on made-up rounds: paired differences, their interval, the two load orders. */

describe('the A/B bench report', () => {
  it('compares paired rounds: the mean of the differences and two standard errors of it', () => {
    const a = [250, 260, 240, 250];
    const b = [240, 252, 228, 240]; // differences −10, −8, −12, −10: mean −10, sample sd √(8/3)
    const pass = compareRounds(a, b);
    expect(pass.meanA).toBe(250);
    expect(pass.meanB).toBe(240);
    expect(pass.difference).toBe(-10);
    expect(pass.halfWidth).toBeCloseTo(2 * Math.sqrt(8 / 3 / 4), 10);
    expect(pass.rounds).toBe(4);
  });

  it('refuses rounds that do not pair up, or too few to give an interval', () => {
    expect(() => compareRounds([1, 2, 3], [1, 2])).toThrow(/paired rounds/);
    expect(() => compareRounds([1], [1])).toThrow(/at least 2/);
  });

  it('cancels the load order: a build that runs 5 µs faster when loaded second leaves the true difference', () => {
    const trueDifference = -8;
    const orderEffect = 5;
    const a = [300, 310, 290, 305];
    // A loaded first: B (second) gains the effect; B loaded first: A (second) gains it.
    const aFirst = compareRounds(
      a,
      a.map((v) => v + trueDifference - orderEffect),
    );
    const bFirst = compareRounds(
      a.map((v) => v - orderEffect),
      a.map((v) => v + trueDifference),
    );
    const combined = combinePasses(aFirst, bFirst);
    expect(aFirst.difference).toBe(-13);
    expect(bFirst.difference).toBe(-3);
    expect(combined.difference).toBe(trueDifference);
    expect(combined.orderEffect).toBe(orderEffect);
    expect(combined.halfWidth).toBe(0);
  });

  it('reads out each pass and a verdict that says when the difference is within its interval', () => {
    const noisy = combinePasses(compareRounds([250, 270], [255, 262]), compareRounds([260, 250], [252, 258]));
    const lines = describeComparison({ a: '../before', b: '.' }, 'Q1', noisy);
    expect(lines[0]).toBe('Q1, A = ../before, B = .');
    expect(lines[1]).toMatch(
      /^A loaded first: A 260\.0 µs, B 258\.5 µs an operation; B − A −1\.5 ± \d+\.\d µs \(2 rounds\)$/,
    );
    expect(lines[3]).toContain('within the noise');
    const clear = combinePasses(
      compareRounds([250, 252, 251], [240, 241, 240]),
      compareRounds([251, 250, 252], [241, 240, 242]),
    );
    expect(describeComparison({ a: 'A', b: 'B' }, 'Q1', clear)[3]).toMatch(
      /^B − A −10\.3 ± \d\.\d µs an operation \(95 %\), B costs less/,
    );
  });
});
