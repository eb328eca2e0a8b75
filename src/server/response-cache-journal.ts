/** Evictions owed at most (entities and types); past it, each owed entity is owed as its whole type. */
const MAX_OWED = 10_000;

/** Evictions made at most this long ago are made again after a loss: a promoted replica may not have them. */
const RECENT_MS = 10_000;

/** Evictions made remembered at most (the oldest forgotten first). */
const MAX_RECENT = 10_000;

/** How often owed evictions are tried again while Redis answers other commands (a Cluster with one master down). */
const RETRY_EVERY_MS = 1_000;

/**
 * The evictions a shared response cache could not make, made again once Redis answers, so the
 * staleness a network cut or a failover can cause is bounded by the cut, not by the TTL:
 * - an eviction that failed is owed (bounded: past 10,000 owed entities each is owed as its
 *   type, which evicts more, never less) and tried again when Redis is back and every second;
 * - one made within the last 10 s is made again after a loss too: Redis replicates
 *   asynchronously, and a replica promoted by a failover may not have seen it;
 * - while anything is owed or being made again, `owing()` is true: the store then answers no
 *   lookup and keeps no answer, so nothing that should have been evicted is served or kept.
 * Entities are names as the store's indexes name them (`Type:id`, or `Type`).
 */
export class EvictionJournal {
  readonly #owed = new Set<string>();
  /** Name -> when its eviction was made (ms), oldest first. */
  readonly #recent = new Map<string, number>();
  #replaying: Promise<void> | undefined;
  #retry: NodeJS.Timeout | undefined;

  constructor(
    /** Evicts every answer indexed by one of `names`; rejects when Redis cannot. */
    private readonly evict: (names: readonly string[]) => Promise<unknown>,
  ) {}

  /** Whether evictions are owed or being made again: the store must not answer meanwhile. */
  owing(): boolean {
    return this.#owed.size > 0 || this.#replaying !== undefined;
  }

  /** `names` were evicted: remembered for a while, in case Redis loses them. */
  made(names: readonly string[]): void {
    const now = Date.now();
    for (const name of names) {
      this.#recent.delete(name);
      this.#recent.set(name, now);
    }
    this.#forgetOld(now);
  }

  /** `names` could not be evicted: owed until Redis takes them. */
  owe(names: readonly string[]): void {
    for (const name of names) this.#owed.add(name);
    if (this.#owed.size > MAX_OWED) {
      const types = new Set([...this.#owed].map((name) => name.split(':', 1)[0]!));
      this.#owed.clear();
      for (const type of types) this.#owed.add(type);
    }
    this.#retry ??= setInterval(() => void this.replay(false), RETRY_EVERY_MS).unref();
  }

  /**
   * Makes the owed evictions again, and after a loss (`afterLoss`: Redis is back, a new master,
   * a new Cluster node) the recent ones too. Resolves once done or failed (they stay owed).
   */
  replay(afterLoss = true): Promise<void> {
    if (this.#replaying !== undefined) return this.#replaying;
    this.#forgetOld(Date.now());
    const names = [...new Set([...this.#owed, ...(afterLoss ? this.#recent.keys() : [])])];
    if (names.length === 0) return Promise.resolve();
    this.#replaying = this.evict(names).then(
      () => {
        for (const name of names) this.#owed.delete(name);
        if (this.#owed.size === 0) this.#stopRetrying();
        this.made(names);
      },
      () => this.owe(names),
    );
    return this.#replaying.finally(() => (this.#replaying = undefined));
  }

  #forgetOld(now: number): void {
    for (const [name, at] of this.#recent) {
      if (now - at <= RECENT_MS && this.#recent.size <= MAX_RECENT) break;
      this.#recent.delete(name);
    }
  }

  #stopRetrying(): void {
    clearInterval(this.#retry);
    this.#retry = undefined;
  }
}
