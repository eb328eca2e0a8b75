import { describe, expect, it } from 'vitest';
import { functionSizes, lineCount } from '../scripts/check-sizes.js';

/*
 * The size checker's counting (scripts/check-sizes.ts), on a fixture: not the repository's sizes,
 * which `npm run check:sizes` reports.
 */

const fixture = `/** A doc comment is not the function's. */
export function declared(a: number): number {
  const inner = (b: number) => {
    return b + 1;
  };
  return inner(a);
}

export function overloaded(a: string): string;
export function overloaded(a: number): number;
export function overloaded(a: unknown): unknown {
  return a;
}

const expressed = function (): void {};

abstract class Shape {
  static count = 0;
  static {
    Shape.count = 1;
  }
  #side = 1;
  constructor(side: number) {
    this.#side = side;
  }
  abstract area(): number;
  get side(): number {
    return this.#side;
  }
  set side(value: number) {
    this.#side = value;
  }
  readonly grow = async (by: number) => {
    this.#side += by;
  };
  scaled(by: number): number {
    return this.#side * by;
  }
}

export const handlers = {
  hit() {
    return [1, 2].map((n) => n * 2);
  },
  miss: function () {},
};
`;

describe('the size checker', () => {
  it('measures every function with a body, nested ones apart, from its first line to its last', () => {
    expect(functionSizes('fixture.ts', fixture).map(({ name, line, lines }) => `${name}:${line}:${lines}`)).toEqual([
      'declared:2:6',
      'inner:3:3',
      // The overloads' signatures have no body: only the implementation counts.
      'overloaded:11:3',
      'expressed:15:1',
      'static {}:19:3',
      'constructor:23:3',
      // An abstract method has no body either.
      'get side:27:3',
      'set side:30:3',
      'grow:33:3',
      'scaled:36:3',
      'hit:42:3',
      '(arrow function):43:1',
      'miss:45:1',
    ]);
  });

  it("counts a file's lines as wc -l does, and a last line without a newline too", () => {
    expect([
      lineCount(''),
      lineCount('a'),
      lineCount('a\n'),
      lineCount('a\nb'),
      lineCount('a\nb\n'),
      lineCount('\n\n'),
    ]).toEqual([0, 1, 1, 2, 2, 2]);
    expect(lineCount(fixture)).toBe(46);
  });
});
