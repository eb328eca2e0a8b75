import type { Caller } from '../callers.js';

/** Operations in flight per key; an entry only while its key holds one. */
type Held = Map<string, number>;

function add(held: Held, key: string, operations: number): void {
  const left = (held.get(key) ?? 0) + operations;
  if (left > 0) held.set(key, left);
  else held.delete(key);
}

/** Whether `key` holds at least its share of `operations`, split evenly between the keys holding any and itself. */
function atShare(held: Held, key: string, operations: number): boolean {
  const own = held.get(key) ?? 0;
  return own * (held.size + (own === 0 ? 1 : 0)) >= operations;
}

/**
 * Who holds the operations in flight, per caller and per address, for fair shedding (load-shedder.ts): as Netflix
 * concurrency-limits' partitioned limiter, but an entry only while it holds work, so no more than the shedder bounds.
 */
export class CallerShares {
  readonly #callers: Held = new Map();
  readonly #addresses: Held = new Map();

  hold(caller: Caller, operations = 1): void {
    add(this.#callers, caller.key, operations);
    add(this.#addresses, caller.address, operations);
  }

  release(caller: Caller, operations = 1): void {
    this.hold(caller, -operations);
  }

  /** Known tokens by their own share (one address's users keep theirs), others by their address's (tokens buy none). */
  atShare(caller: Caller, operations: number): boolean {
    return caller.known
      ? atShare(this.#callers, caller.key, operations)
      : atShare(this.#addresses, caller.address, operations);
  }
}
