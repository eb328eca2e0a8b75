import { describe, expect, it } from 'vitest';
import { type PageCall, type PagePlan, planPageWindow, sliceWindow } from '../src/domain/page-windows.js';

const MAX_SIZE = 100;
const MAX_OFFSET = 300;

/** First offset a call asks for. */
const startOf = (c: PageCall): number => (c.page - 1) * c.size;
const totalOf = (p: PagePlan): number => p.calls.reduce((sum, c) => sum + c.size, 0);

/**
 * Brute-force oracle, formulated independently of the implementation: enumerate, for every
 * size, the page interval holding the window's first item and the one holding its last item.
 * - single: the smallest size whose first-item interval is also the last-item interval.
 * - pairMin: the least s1 + s2 over all pairs (first-item interval of s1, last-item interval of
 *   s2) whose union covers the window, i.e. the first ends at or after the second starts.
 * Per window start, `minS1Reaching[t]` = the smallest s1 whose first-item interval ends at or
 * after start + t; each window then costs one pass over s2 instead of one over all pairs.
 */
function oracleForStart(a: number, maxSize: number) {
  const minS1Reaching = new Array<number>(maxSize + 1).fill(Infinity);
  for (let s1 = 1; s1 <= maxSize; s1++) {
    const reach = (Math.floor(a / s1) + 1) * s1 - a; // 1..s1
    for (let t = 0; t <= reach; t++) if (s1 < minS1Reaching[t]!) minS1Reaching[t] = s1;
  }
  return (limit: number): { single: number | undefined; pairMin: number } => {
    const e = a + limit - 1;
    let single: number | undefined;
    for (let s = 1; s <= maxSize; s++) {
      if (Math.floor(a / s) === Math.floor(e / s)) {
        single = s;
        break;
      }
    }
    let pairMin = Infinity;
    for (let s2 = 1; s2 <= maxSize; s2++) {
      const need = Math.max(0, Math.floor(e / s2) * s2 - a); // where the second interval starts
      const s1 = minS1Reaching[need]!;
      if (s1 + s2 < pairMin) pairMin = s1 + s2;
    }
    return { single, pairMin };
  };
}

interface Case {
  offset: number;
  limit: number;
  plan: PagePlan;
}

/** Every plan of the exhaustive range, computed once and shared by the checks below. */
const cases: Case[] = [];
for (let offset = 0; offset <= MAX_OFFSET; offset++) {
  for (let limit = 1; limit <= MAX_SIZE; limit++) {
    cases.push({ offset, limit, plan: planPageWindow(offset, limit) });
  }
}

/** Collects failures instead of calling expect 30k times (fast, and one readable diff). */
function failuresOf(check: (c: Case) => string | undefined): string[] {
  const out: string[] = [];
  for (const c of cases) {
    const why = check(c);
    if (why !== undefined && out.length < 20) out.push(`offset=${c.offset} limit=${c.limit}: ${why}`);
  }
  return out;
}

describe('planPageWindow, exhaustive for offsets 0..300 and limits 1..100', () => {
  it('echoes the window and emits valid calls (1 or 2, size 1..100, page >= 1)', () => {
    const bad = failuresOf(({ offset, limit, plan }) => {
      if (plan.offset !== offset || plan.limit !== limit) return 'window not echoed';
      if (plan.calls.length < 1 || plan.calls.length > 2) return `${plan.calls.length} calls`;
      for (const c of plan.calls) {
        if (!Number.isInteger(c.size) || c.size < 1 || c.size > MAX_SIZE) return `size ${c.size}`;
        if (!Number.isInteger(c.page) || c.page < 1) return `page ${c.page}`;
      }
      return undefined;
    });
    expect(bad).toEqual([]);
  });

  it('covers every offset of the window', () => {
    const bad = failuresOf(({ offset, limit, plan }) => {
      for (let pos = offset; pos < offset + limit; pos++) {
        if (!plan.calls.some((c) => startOf(c) <= pos && pos < startOf(c) + c.size)) {
          return `offset ${pos} not covered by ${JSON.stringify(plan.calls)}`;
        }
      }
      return undefined;
    });
    expect(bad).toEqual([]);
  });

  it('uses one call exactly when a single page can hold the window, with the smallest size', () => {
    const oracles = new Map<number, ReturnType<typeof oracleForStart>>();
    const bad = failuresOf(({ offset, limit, plan }) => {
      let oracle = oracles.get(offset);
      if (!oracle) {
        oracle = oracleForStart(offset, MAX_SIZE);
        oracles.set(offset, oracle);
      }
      const { single, pairMin } = oracle(limit);
      if (single !== undefined) {
        if (plan.calls.length !== 1) return `oracle has one page of size ${single}, got ${plan.calls.length} calls`;
        if (plan.calls[0]!.size !== single) return `size ${plan.calls[0]!.size}, oracle ${single}`;
        return undefined;
      }
      if (plan.calls.length !== 2) return `no single page exists, got ${plan.calls.length} calls`;
      if (totalOf(plan) !== pairMin) return `fetches ${totalOf(plan)}, oracle minimum ${pairMin}`;
      return undefined;
    });
    expect(bad).toEqual([]);
  });

  it('sometimes needs overlapping and unequal sizes (the exhaustive range exercises them)', () => {
    const two = cases.filter((c) => c.plan.calls.length === 2);
    const overlapping = two.filter(({ plan }) => {
      const [a, b] = plan.calls as [PageCall, PageCall];
      return startOf(b) < startOf(a) + a.size;
    });
    expect(two.length).toBeGreaterThan(1000);
    expect(overlapping.length).toBeGreaterThan(0);
    expect(two.some(({ plan }) => plan.calls[0]!.size !== plan.calls[1]!.size)).toBe(true);
  });
});

describe('planPageWindow, small maxSize against a naive all-pairs search', () => {
  // Independent of both the implementation and the oracle above: every page interval of every
  // size that touches the window, as a bit mask over the window; pairs are tried exhaustively.
  it('matches the fewest calls and the least over-fetch for maxSize 1..13', () => {
    const bad: string[] = [];
    for (const maxSize of [1, 2, 3, 5, 8, 13]) {
      for (let offset = 0; offset <= 40; offset++) {
        for (let limit = 1; limit <= maxSize; limit++) {
          const full = (1 << limit) - 1;
          const intervals: { size: number; mask: number }[] = [];
          for (let s = 1; s <= maxSize; s++) {
            for (let p = Math.floor(offset / s); p * s < offset + limit; p++) {
              let mask = 0;
              for (let i = 0; i < limit; i++) if (p * s <= offset + i && offset + i < (p + 1) * s) mask |= 1 << i;
              intervals.push({ size: s, mask });
            }
          }
          let single = Infinity;
          for (const iv of intervals) if (iv.mask === full) single = Math.min(single, iv.size);
          let pair = Infinity;
          for (const x of intervals) {
            for (const y of intervals) if ((x.mask | y.mask) === full) pair = Math.min(pair, x.size + y.size);
          }
          const plan = planPageWindow(offset, limit, maxSize);
          const ok =
            plan.calls.every((c) => c.size <= maxSize) &&
            (single < Infinity
              ? plan.calls.length === 1 && plan.calls[0]!.size === single
              : plan.calls.length === 2 && totalOf(plan) === pair);
          if (!ok) bad.push(`maxSize=${maxSize} offset=${offset} limit=${limit}: ${JSON.stringify(plan.calls)}`);
        }
      }
    }
    expect(bad.slice(0, 20)).toEqual([]);
  });

  it('handles a few known windows', () => {
    expect(planPageWindow(0, 10).calls).toEqual([{ page: 1, size: 10 }]);
    expect(planPageWindow(40, 20).calls).toEqual([{ page: 3, size: 20 }]);
    expect(planPageWindow(5, 10).calls).toEqual([{ page: 1, size: 15 }]);
    // [25, 101): no page of size <= 100 holds it; [0, 100) + [100, 101) fetches 101.
    expect(planPageWindow(25, 76).calls).toEqual([
      { page: 1, size: 100 },
      { page: 101, size: 1 },
    ]);
    expect(planPageWindow(0, 100).calls).toEqual([{ page: 1, size: 100 }]);
    // [95, 105): sizes 10 to 14 split it across two pages; 15 holds it in [90, 105).
    expect(planPageWindow(95, 10).calls).toEqual([{ page: 7, size: 15 }]);
    // [1, 101): a single page would need size 101; the cheapest pair is [0, 100) and [100, 101).
    expect(planPageWindow(1, 100).calls).toEqual([
      { page: 1, size: 100 },
      { page: 101, size: 1 },
    ]);
    // Far out, [1e12+3, 1e12+103): [1e12+3, 1e12+64) and [1e12+64, 1e12+105), 102 items, the
    // least any pair fetches there by the oracle above.
    const far = planPageWindow(1e12 + 3, 100, 100);
    expect(far.calls).toEqual([
      { page: 16_393_442_624, size: 61 },
      { page: 24_390_243_905, size: 41 },
    ]);
    expect(totalOf(far)).toBe(oracleForStart(1e12 + 3, MAX_SIZE)(100).pairMin);
  });
});

describe('sliceWindow', () => {
  // The collection's items are their own offsets; `length` is where it ends.
  const ITEMS = Array.from({ length: MAX_OFFSET + 2 * MAX_SIZE }, (_, i) => i);
  const fetchPage = (c: PageCall, length: number): readonly number[] =>
    ITEMS.slice(Math.min(startOf(c), length), Math.min(startOf(c) + c.size, length));

  it('returns exactly the window, in order, for every plan and where the collection ends', () => {
    const bad = failuresOf(({ offset, limit, plan }) => {
      const end = offset + limit;
      const second = plan.calls[1] ? startOf(plan.calls[1]) : end;
      // Past the window, exactly at its end, and ending inside it: mid-window, one short of
      // the end, where the second call starts (short first page, empty second), right after
      // the first item, and at the window's start (everything empty).
      const lengths = [ITEMS.length, end, end - 1, offset + (limit >> 1), second, offset + 1, offset];
      for (const length of lengths) {
        const got = sliceWindow(
          plan,
          plan.calls.map((c) => fetchPage(c, length)),
        );
        const want = Math.max(0, Math.min(end, length) - offset);
        if (got.length !== want) return `length=${length}: ${got.length} items, want ${want}`;
        for (let i = 0; i < want; i++) if (got[i] !== offset + i) return `length=${length}: item ${i} is ${got[i]}`;
      }
      return undefined;
    });
    expect(bad).toEqual([]);
  });

  it('takes overlapping items once, whatever the call order', () => {
    const plan: PagePlan = {
      calls: [
        { page: 2, size: 10 }, // [10, 20)
        { page: 1, size: 15 }, // [0, 15)
      ],
      offset: 5,
      limit: 12,
    };
    const pages = plan.calls.map((c) => ITEMS.slice(startOf(c), startOf(c) + c.size));
    expect(sliceWindow(plan, pages)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
  });

  it('ignores items beyond a call size and stops at a gap', () => {
    const plan: PagePlan = {
      calls: [
        { page: 1, size: 3 },
        { page: 2, size: 3 },
      ],
      offset: 1,
      limit: 5,
    };
    // The first page wrongly returns 4 items: only offsets 0..2 are what the call asked for.
    expect(
      sliceWindow(plan, [
        [0, 1, 2, 99],
        [3, 4, 5],
      ]),
    ).toEqual([1, 2, 3, 4, 5]);
    // A short first page leaves a hole at offset 2: nothing after it is trustworthy.
    expect(
      sliceWindow(plan, [
        [0, 1],
        [3, 4, 5],
      ]),
    ).toEqual([1]);
  });

  it('rejects a page count that does not match the calls', () => {
    expect(() => sliceWindow(planPageWindow(0, 10), [])).toThrow(RangeError);
    expect(() => sliceWindow(planPageWindow(0, 10), [[], []])).toThrow(RangeError);
  });
});

describe('planPageWindow input validation', () => {
  it.each([
    ['negative offset', -1, 10, 100],
    ['fractional offset', 1.5, 10, 100],
    ['NaN offset', Number.NaN, 10, 100],
    ['infinite offset', Number.POSITIVE_INFINITY, 10, 100],
    ['unsafe offset', 2 ** 53, 10, 100],
    ['offset + limit past the safe range', Number.MAX_SAFE_INTEGER, 1, 100],
    ['zero limit', 0, 0, 100],
    ['negative limit', 0, -5, 100],
    ['fractional limit', 0, 2.5, 100],
    ['limit above the default maxSize', 0, 101, 100],
    ['limit above a custom maxSize', 0, 11, 10],
    ['zero maxSize', 0, 1, 0],
    ['fractional maxSize', 0, 1, 1.5],
    ['NaN limit', 0, Number.NaN, 100],
  ])('throws RangeError for %s', (_label, offset, limit, maxSize) => {
    expect(() => planPageWindow(offset, limit, maxSize)).toThrow(RangeError);
  });

  it('accepts the edges', () => {
    expect(planPageWindow(0, 1).calls).toEqual([{ page: 1, size: 1 }]);
    expect(planPageWindow(0, 1, 1).calls).toEqual([{ page: 1, size: 1 }]);
    expect(planPageWindow(7, 1, 1).calls).toEqual([{ page: 8, size: 1 }]);
    expect(planPageWindow(Number.MAX_SAFE_INTEGER - 1, 1).calls).toHaveLength(1);
  });
});
