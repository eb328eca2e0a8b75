import { createHmac, randomBytes } from 'node:crypto';
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

/** This process's key for the hashes `shownKey` makes: held in memory only, another one each start. */
const SHOWN_KEY = randomBytes(32);

/**
 * A caller's key as it is shown outside the process (the status page): its kind (`token`, `account`, `address`) and a
 * keyed hash, the same for the life of the process and matching nothing else (an address's plain hash could be found
 * by trying every address); a class of work that is no one's (`events`) as it is.
 */
function shownKey(key: string): string {
  const colon = key.indexOf(':');
  if (colon < 0) return key;
  return `${key.slice(0, colon)}:${createHmac('sha256', SHOWN_KEY).update(key).digest('base64url').slice(0, 12)}`;
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

  /** The `count` callers holding the most now, most first, as `shownKey` shows them. */
  heaviest(count: number): { readonly caller: string; readonly inFlight: number }[] {
    if (count < 1) return [];
    const top: [string, number][] = [];
    for (const entry of this.#callers) {
      if (top.length === count && entry[1] <= top[count - 1]![1]) continue;
      top.push(entry);
      top.sort((a, b) => b[1] - a[1]);
      top.length = Math.min(top.length, count);
    }
    return top.map(([key, inFlight]) => ({ caller: shownKey(key), inFlight }));
  }

  /** Known tokens by their own share (one address's users keep theirs), others by their address's (tokens buy none). */
  atShare(caller: Caller, operations: number): boolean {
    return caller.known
      ? atShare(this.#callers, caller.key, operations)
      : atShare(this.#addresses, caller.address, operations);
  }
}
