import { type ChosenRead, carries, chooseHeadReads, type Needs, type Strategy } from '../domain/needs.js';
import type { OperationName } from '../domain/operations.js';

/*
 * The reads a plan is made of: each upstream call with its parameters, and the by-id reads of a
 * head with what each brings, which the loaders carry out.
 */

/** One upstream call the operation makes: an operation of the route table and its parameters. */
export interface PlannedRead {
  readonly operation: OperationName;
  readonly params: Readonly<Record<string, string | number | undefined>>;
  /** Its parameters, or whether it happens at all, depend on data (a total, a filtered page). */
  readonly estimated?: true;
}

/**
 * The by-id reads of one head the plan decided, and what they are for: the loaders carry out
 * these reads (less any whose parts the request already holds), never reads of their own.
 */
export interface HeadReads {
  /** What the head's fields need of these reads. */
  readonly needs: Needs;
  /** Each read, with the parts it was chosen to bring. */
  readonly reads: readonly ChosenRead[];
}

export const NO_READS: HeadReads = Object.freeze({ needs: 0, reads: [] });

/** Reads collected while binding: identical reads once, estimated ones each. */
export class ReadList {
  readonly reads: PlannedRead[] = [];
  readonly #keys = new Set<string>();
  exact = true;

  /** A read that happens whenever the operation runs; the same route and parameters once. */
  add(operation: OperationName, params: PlannedRead['params']): void {
    const key = `${operation} ${JSON.stringify(params)}`;
    if (this.#keys.has(key)) return;
    this.#keys.add(key);
    this.reads.push({ operation, params });
  }

  /** A call that is never shared with another (a mutation, what follows it). */
  append(operation: OperationName, params: PlannedRead['params']): void {
    this.reads.push({ operation, params });
  }

  /** A call whose parameters or very existence depend on data: counted, and the plan is an upper bound. */
  estimate(operation: OperationName, params: PlannedRead['params']): void {
    this.reads.push({ operation, params, estimated: true });
    this.exact = false;
  }
}

/** The reads that cover `needs` of a head beside what `known` reads carry (domain/needs.ts decides which). */
export function headReads(needs: Needs, known: Needs, strategy: Strategy): HeadReads {
  return needs === 0 ? NO_READS : { needs, reads: chooseHeadReads(needs, known, strategy) };
}

/** What a set of reads carries. */
export const carriedBy = (reads: readonly ChosenRead[]): Needs =>
  reads.reduce((bits, { read }) => bits | carries[read], 0);
