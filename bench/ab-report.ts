/**
 * The arithmetic of `npm run bench:ab`: CPU time per operation of two builds measured in turns,
 * round by round, in one process. Rounds are paired (A and B measured back to back), so the
 * comparison is the mean of the per-round differences, with a 95 % interval from their spread.
 */

export interface OrderedComparison {
  /** Mean CPU µs per operation of each build over the rounds. */
  readonly meanA: number;
  readonly meanB: number;
  /** B − A, mean of the paired per-round differences (negative: B costs less). */
  readonly difference: number;
  /** Half-width of its 95 % interval (normal approximation, 2 standard errors). */
  readonly halfWidth: number;
  readonly rounds: number;
}

/**
 * One pass of the harness: both builds loaded into one process in one order. The build loaded
 * second has been measured to run 3–6 µs an operation faster for the same code, hence two passes.
 */
export function compareRounds(a: readonly number[], b: readonly number[]): OrderedComparison {
  if (a.length !== b.length || a.length < 2)
    throw new Error(`paired rounds needed (at least 2): got ${a.length} and ${b.length}`);
  const n = a.length;
  const differences = a.map((value, i) => b[i]! - value);
  const difference = mean(differences);
  const variance = differences.reduce((sum, d) => sum + (d - difference) ** 2, 0) / (n - 1);
  return { meanA: mean(a), meanB: mean(b), difference, halfWidth: 2 * Math.sqrt(variance / n), rounds: n };
}

export interface Comparison {
  /** A loaded first, then B loaded first. */
  readonly passes: readonly [OrderedComparison, OrderedComparison];
  /** B − A with the load order's effect cancelled: the mean of the two passes' differences. */
  readonly difference: number;
  readonly halfWidth: number;
  /** How much faster the build loaded second ran, whichever it was (positive: faster). */
  readonly orderEffect: number;
}

/** The two passes together: the order effect adds to B − A in one and subtracts in the other. */
export function combinePasses(aFirst: OrderedComparison, bFirst: OrderedComparison): Comparison {
  return {
    passes: [aFirst, bFirst],
    difference: (aFirst.difference + bFirst.difference) / 2,
    halfWidth: Math.sqrt(aFirst.halfWidth ** 2 + bFirst.halfWidth ** 2) / 2,
    orderEffect: (bFirst.difference - aFirst.difference) / 2,
  };
}

const µs = (value: number) => `${value >= 0 ? '+' : '−'}${Math.abs(value).toFixed(1)}`;

/** The report's lines: each pass, then the verdict. */
export function describeComparison(
  labels: { readonly a: string; readonly b: string },
  scenario: string,
  comparison: Comparison,
): string[] {
  const [aFirst, bFirst] = comparison.passes;
  const pass = (name: string, c: OrderedComparison) =>
    `${name}: A ${c.meanA.toFixed(1)} µs, B ${c.meanB.toFixed(1)} µs an operation; B − A ${µs(c.difference)} ± ${c.halfWidth.toFixed(1)} µs (${c.rounds} rounds)`;
  const { difference, halfWidth } = comparison;
  const verdict =
    Math.abs(difference) <= halfWidth ? 'within the noise' : difference < 0 ? 'B costs less' : 'B costs more';
  return [
    `${scenario}, A = ${labels.a}, B = ${labels.b}`,
    pass('A loaded first', aFirst),
    pass('B loaded first', bFirst),
    `B − A ${µs(difference)} ± ${halfWidth.toFixed(1)} µs an operation (95 %), ${verdict}; the build loaded second ran ${comparison.orderEffect.toFixed(1)} µs faster`,
  ];
}

function mean(values: readonly number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}
