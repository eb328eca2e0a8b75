/** Which bound refused a take: the process's, the caller's own, or the caller's fair share of a process half full. */
export type LedgerBound = 'process' | 'caller' | 'share';

/**
 * What callers hold of a bounded resource (open subscriptions, watched heads): `perCaller` each, `max` in all, and once
 * half of `max` is taken, no more than a fair share of it (split between the callers holding any and one more to come),
 * so a few callers cannot take the whole room while others wait. An entry only while its caller holds something.
 */
export class Ledger {
  readonly #held = new Map<string, number>();
  #total = 0;

  constructor(
    private readonly perCaller: number,
    private readonly max: number,
  ) {}

  get total(): number {
    return this.#total;
  }

  /** Takes `count` for `caller`, or says which bound refuses it (nothing taken). */
  take(caller: string, count = 1): LedgerBound | undefined {
    if (count <= 0) return undefined;
    const held = this.#held.get(caller) ?? 0;
    if (this.#total + count > this.max) return 'process';
    if (held + count > this.perCaller) return 'caller';
    if (2 * this.#total >= this.max && (held + count) * (this.#held.size + 1) > this.max) return 'share';
    this.#total += count;
    this.#held.set(caller, held + count);
    return undefined;
  }

  give(caller: string, count = 1): void {
    if (count <= 0) return;
    const left = (this.#held.get(caller) ?? 0) - count;
    this.#total -= count;
    if (left > 0) this.#held.set(caller, left);
    else this.#held.delete(caller);
  }
}
