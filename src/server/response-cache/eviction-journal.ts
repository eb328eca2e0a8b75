import { LRUCache } from 'lru-cache';

/** What an eviction deletes: the answers indexed by entities (`Type:id`, or `Type`), and answers by their keys. */
export interface Evictions {
  readonly names: readonly string[];
  readonly answers: readonly string[];
}

/** Evicts `work`, resolving with the keys deleted; keys taken off an index stay in `pending` until deleted. */
export type Evict = (work: Evictions, pending: Set<string>) => Promise<readonly string[]>;

/** Owed entities and keys at most, each; past it entities are owed as types (evicting more), further keys dropped. */
const MAX_OWED = 10_000;
/** How often owed evictions are tried again while Redis answers other commands (a Cluster with one master down). */
const RETRY_EVERY_MS = 1_000;

/** Names or keys evicted in the last 10 s, 10,000 at most (the oldest forgotten first): made again after a loss. */
const recent = () => new LRUCache<string, true>({ max: 10_000, ttl: 10_000, ttlAutopurge: false });

function recentItems(cache: LRUCache<string, true>): string[] {
  cache.purgeStale();
  return [...cache.keys()];
}

/**
 * The evictions Redis missed, made again once it answers, so staleness after a network cut or a failover is bounded by
 * the cut, not the TTL: owed ones (entities, and answer keys already off their indexes) when Redis is back and every
 * second, recent ones after a loss too (Redis replicates asynchronously: a promoted replica may not have them). While
 * anything is owed or being made again, the store answers and keeps nothing.
 */
export class EvictionJournal {
  readonly #owedNames = new Set<string>();
  readonly #owedAnswers = new Set<string>();
  readonly #recentNames = recent();
  readonly #recentAnswers = recent();
  #replaying: Promise<void> | undefined;
  #retry: NodeJS.Timeout | undefined;

  constructor(private readonly evict: Evict) {}

  /** Whether evictions are owed or being made again. */
  owing(): boolean {
    return this.#owingAnything() || this.#replaying !== undefined;
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

  /** Makes the owed evictions again, after a loss (Redis back, a new master) the recent ones; failures stay owed. */
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
        if (!this.#owingAnything()) {
          clearInterval(this.#retry);
          this.#retry = undefined;
        }
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
}
