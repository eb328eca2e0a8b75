import type { Caller } from '../callers.js';

/** Operations in flight per key; an entry only while its key holds one. */
type Held = Map<string, number>;

function add(held: Held, key: string, operations: number): void {
  const left = (held.get(key) ?? 0) + operations;
  if (left > 0) held.set(key, left);
  else held.delete(key);
}

/**
 * Whether `key` holds at least its share of `operations`: them split evenly between the keys
 * holding any, itself counted (a key with none is one more).
 */
function atShare(held: Held, key: string, operations: number): boolean {
  const own = held.get(key) ?? 0;
  return own * (held.size + (own === 0 ? 1 : 0)) >= operations;
}

/**
 * Who holds the operations in flight, for fair shedding (load-shedder.ts): per caller (its token
 * once known to be real, else its address) and per client address, so an address that makes up
 * a token per request still holds one share. As Netflix concurrency-limits' partitioned limiter, each
 * partition keeps its share under load; here the partitions are whoever has work in flight, so an
 * entry lives only while its key holds an operation: there are never more entries than operations
 * in flight, which the shedder bounds. O(1) per operation.
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

  /**
   * Whether `caller` holds its share of `operations` or more: a caller with a token known to be
   * real by its own share alone (users behind one address each keep theirs), any other by its
   * address's (everything from its address: made-up tokens cannot buy more than one share).
   */
  atShare(caller: Caller, operations: number): boolean {
    return caller.known
      ? atShare(this.#callers, caller.key, operations)
      : atShare(this.#addresses, caller.address, operations);
  }
}
