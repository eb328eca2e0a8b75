import { LRUCache } from 'lru-cache';

/** What an eviction deletes: the answers indexed by entities (`Type:id`, or `Type`), and answers by their keys. */
export interface Evictions {
  readonly names: readonly string[];
  readonly answers: readonly string[];
}

/**
 * Evicts `work`; rejects when Redis cannot. The answer keys it took off an index and has not
 * deleted yet go in `pending` until they are deleted: what is still owed if it fails half-way.
 * Resolves with the answer keys it deleted.
 */
export type Evict = (work: Evictions, pending: Set<string>) => Promise<readonly string[]>;

/**
 * Entities and answer keys owed at most, each; past it an owed entity is owed as its type, and further answer keys are
 * not kept.
 */
const MAX_OWED = 10_000;

/** Evictions made at most this long ago are made again after a loss: a promoted replica may not have them. */
const RECENT_MS = 10_000;

/** Evictions made remembered at most, entities and answer keys each (the oldest forgotten first). */
const MAX_RECENT = 10_000;

/** How often owed evictions are tried again while Redis answers other commands (a Cluster with one master down). */
const RETRY_EVERY_MS = 1_000;

/** Names or keys evicted within the last RECENT_MS, at most MAX_RECENT of them (lru-cache: the oldest go first). */
const recent = () => new LRUCache<string, true>({ max: MAX_RECENT, ttl: RECENT_MS, ttlAutopurge: false });

/** What `recent()` still holds. */
function recentItems(cache: LRUCache<string, true>): string[] {
  cache.purgeStale();
  return [...cache.keys()];
}

/**
 * The evictions a shared response cache could not make, made again once Redis answers, so the
 * staleness a network cut or a failover can cause is bounded by the cut, not by the TTL:
 * - an eviction that failed is owed: its entities, and the answer keys it had taken off their
 *   indexes but not deleted (the index no longer names them); tried again when Redis is back and
 *   every second. Bounded: past 10,000 owed entities each is owed as its type (which evicts more,
 *   never less); past 10,000 owed answer keys the others keep their TTL;
 * - one made within the last 10 s (its entities and the answer keys it deleted) is made again
 *   after a loss too: Redis replicates asynchronously, and a replica promoted by a failover may
 *   not have seen it;
 * - while anything is owed or being made again, `owing()` is true: the store then answers no
 *   lookup and keeps no answer, so nothing that should have been evicted is served or kept by it.
 */
export class EvictionJournal {
  readonly #owedNames = new Set<string>();
  readonly #owedAnswers = new Set<string>();
  readonly #recentNames = recent();
  readonly #recentAnswers = recent();
  #replaying: Promise<void> | undefined;
  #retry: NodeJS.Timeout | undefined;

  constructor(private readonly evict: Evict) {}

  /** Whether evictions are owed or being made again: the store must not answer meanwhile. */
  owing(): boolean {
    return this.#owedNames.size > 0 || this.#owedAnswers.size > 0 || this.#replaying !== undefined;
  }

  /** `work` was evicted (`answers`: the keys deleted): remembered for a while, in case Redis loses it. */
  made(work: Evictions): void {
    for (const name of work.names) this.#recentNames.set(name, true);
    for (const answer of work.answers) this.#recentAnswers.set(answer, true);
  }

  /** `work` could not be evicted, or not all of it: owed until Redis takes it. */
  owe(work: Evictions): void {
    for (const name of work.names) this.#owedNames.add(name);
    if (this.#owedNames.size > MAX_OWED) {
      const types = new Set([...this.#owedNames].map((name) => name.split(':', 1)[0]!));
      this.#owedNames.clear();
      for (const type of types) this.#owedNames.add(type);
    }
    for (const answer of work.answers) if (this.#owedAnswers.size < MAX_OWED) this.#owedAnswers.add(answer);
    this.#retry ??= setInterval(() => void this.replay(false), RETRY_EVERY_MS).unref();
  }

  /**
   * Makes the owed evictions again, and after a loss (`afterLoss`: Redis is back, a new master,
   * a Cluster's slots on new masters) the recent ones too. Resolves once done or failed (then
   * what is left stays owed).
   */
  replay(afterLoss = true): Promise<void> {
    if (this.#replaying !== undefined) return this.#replaying;
    const work: Evictions = {
      names: [...new Set([...this.#owedNames, ...(afterLoss ? recentItems(this.#recentNames) : [])])],
      answers: [...new Set([...this.#owedAnswers, ...(afterLoss ? recentItems(this.#recentAnswers) : [])])],
    };
    if (work.names.length === 0 && work.answers.length === 0) return Promise.resolve();
    const pending = new Set<string>();
    this.#replaying = this.evict(work, pending).then(
      (deleted) => {
        for (const name of work.names) this.#owedNames.delete(name);
        for (const answer of work.answers) this.#owedAnswers.delete(answer);
        if (!this.#owingAnything()) this.#stopRetrying();
        this.made({ names: work.names, answers: deleted });
      },
      () => this.owe({ names: work.names, answers: [...work.answers, ...pending] }),
    );
    return this.#replaying.finally(() => (this.#replaying = undefined));
  }

  /** Makes what is owed, if anything (a process about to close its connection). */
  settle(): Promise<void> {
    return this.#owingAnything() ? this.replay(false) : Promise.resolve();
  }

  #owingAnything(): boolean {
    return this.#owedNames.size > 0 || this.#owedAnswers.size > 0;
  }

  #stopRetrying(): void {
    clearInterval(this.#retry);
    this.#retry = undefined;
  }
}
