import DataLoader from 'dataloader';
import {
  carries,
  chooseHeadReads,
  HEAD_NEEDS,
  type HeadPart,
  type HeadRead,
  type HeadSourceRead,
  headParts,
  Need,
  type Needs,
  type Strategy,
} from '../domain/needs.js';
import type { HeadReads } from '../plan/reads.js';
import { UpstreamError } from '../upstream/errors.js';
import type { HeadADto, HeadBDto } from '../upstream/schemas.js';

export type HeadDto = HeadADto | HeadBDto;

/**
 * A head as one read answered it, with its variant: A from Get Head Ext, the pages and Update Head; B from the others.
 */
export type HeadAnswer =
  | { readonly variant: 'A'; readonly head: HeadADto }
  | { readonly variant: 'B'; readonly head: HeadBDto };

/** What each part of a head holds, once a read carrying it answered. */
export interface HeadPartValues {
  readonly head: HeadDto;
  readonly variantA: HeadADto;
  readonly hairB: HeadBDto;
  /** `head_metadata`, null when the head has none. */
  readonly metadata: unknown;
}

/** A part asked for before any read carrying it answered: a planning bug, never the caller's input. */
class PartNotRead extends Error {
  constructor(part: HeadPart) {
    super(`head part ${part} read before it was loaded`);
  }
}

/**
 * Everything one request has read of one head, merged from every read that carried part of it:
 * by-id reads, listings, an update's answer. Fields read what they need from here, at once when
 * it is there.
 */
export class HeadRecord {
  readonly id: string;
  #head: HeadDto | undefined;
  #a: HeadADto | undefined;
  #b: HeadBDto | undefined;
  #metadata: unknown;
  /** What the values above answer. */
  available: Needs = 0;
  /** What the reads started for this head carry, answered or not. */
  carried: Needs = 0;
  /** Per need bit: settles when a read carrying it answered, rejects when every one of them failed. */
  #outcomes: Map<number, Promise<void>> | undefined; // made by the first read started: a listed head has none
  /** Settles when every read started for this head has answered or failed. */
  #settled: Promise<unknown> | undefined;
  #pending = 0;

  constructor(id: string) {
    this.id = id;
  }

  /** The fields every read carries: there once the record is loaded (`HeadLoader.load`). */
  get head(): HeadDto {
    if (this.#head === undefined) throw new PartNotRead('head');
    return this.#head;
  }

  /** Whether the first read of this head has answered (a listing seeds it, a load waits for it). */
  get known(): boolean {
    return this.#head !== undefined;
  }

  /** One part of the head, once a read carrying it answered (`HeadLoader.part` waits for it). */
  part<P extends HeadPart>(part: P): HeadPartValues[P] {
    if (!(this.available & Need[part])) throw new PartNotRead(part);
    return HeadRecord.#parts[part](this) as HeadPartValues[P];
  }

  /** Where each part is held (made once, not per read of a part). */
  static readonly #parts: { readonly [K in HeadPart]: (record: HeadRecord) => HeadPartValues[K] | undefined } = {
    head: (record) => record.#head,
    variantA: (record) => record.#a,
    hairB: (record) => record.#b,
    metadata: (record) => record.#metadata,
  };

  /** Takes what a read answered; values already held are kept (the first answer wins). */
  receive(bits: Needs, answer: HeadAnswer): void {
    this.#head ??= answer.head;
    if (answer.variant === 'A') this.#a ??= answer.head;
    else this.#b ??= answer.head;
    if (bits & Need.metadata && !(this.available & Need.metadata)) this.#metadata = answer.head.head_metadata ?? null;
    this.available |= bits;
    this.carried |= bits;
  }

  /** Reads started for this head in one batch, each with what it carries. */
  start(reads: readonly { readonly bits: Needs; readonly answer: Promise<HeadAnswer> }[]): void {
    const settled = reads.map(({ bits, answer }) => ({ bits, done: answer.then((head) => this.receive(bits, head)) }));
    for (const part of headParts) {
      const bit = Need[part];
      if (this.carried & bit) continue;
      const carriers = settled.filter((read) => read.bits & bit).map((read) => read.done);
      if (carriers.length === 0) continue;
      // The bit is there as soon as any read carrying it answered.
      const outcome =
        carriers.length === 1
          ? carriers[0]!
          : Promise.any(carriers).catch((error: AggregateError) => Promise.reject(error.errors[0]));
      outcome.catch(() => undefined); // awaited by whoever needs it; nobody else must see it fail
      this.#outcomes ??= new Map();
      this.#outcomes.set(bit, outcome);
    }
    for (const read of settled) this.carried |= read.bits;
    this.#pending += settled.length;
    const all = Promise.allSettled(settled.map((read) => read.done)).then(() => {
      this.#pending -= settled.length;
    });
    this.#settled = this.#settled === undefined ? all : Promise.all([this.#settled, all]);
  }

  /**
   * This record once the head is read and no read started for it is still out: a head leaves no
   * read of its own behind when its operation answers, whatever its fields turned out to need.
   */
  settled(): HeadRecord | Promise<HeadRecord> {
    if (this.#pending === 0 || this.#settled === undefined) return this.ready(Need.head);
    return this.#settled.then(() => this.ready(Need.head));
  }

  /** This record once the reads of `needs` answered: at once if they have. */
  ready(needs: Needs): HeadRecord | Promise<HeadRecord> {
    const wanted = (needs | Need.head) & HEAD_NEEDS;
    if ((this.available & wanted) === wanted) return this;
    const waits: Promise<void>[] = [];
    for (const part of headParts) {
      const bit = Need[part];
      if (!(wanted & bit & ~this.available)) continue;
      const outcome = this.#outcomes?.get(bit);
      // Nothing carrying it was started: a planning bug, reported as the field's failure.
      waits.push(outcome ?? Promise.reject(new PartNotRead(part)));
    }
    return Promise.all(waits).then(() => this);
  }
}

interface HeadLoad {
  readonly id: string;
  readonly needs: Needs;
}

/**
 * The request's one loader of heads by id, whose records every read fills: listings and updates
 * seed them, so a later field of a listed head costs nothing.
 *
 * It carries out the reads the operation's plan decided (`carryOut`): the plan is the one place
 * that decides which read serves which field. Only an operation run without a plan (execution
 * without the planner's plugin, or a field the plan could not foresee) loads by need (`load`,
 * `with`): the loads of one tick merged per head, and the plan's own rule (`chooseHeadReads`)
 * choosing their reads.
 */
export class HeadLoader {
  readonly #records = new Map<string, HeadRecord>();
  readonly #read: (read: HeadRead, id: string) => Promise<HeadAnswer>;
  readonly #strategy: Strategy;
  #batches: DataLoader<HeadLoad, HeadRecord> | undefined;
  /** The heads a read of this request found gone (the upstream answered 404), made on the first. */
  #gone: Set<string> | undefined;

  constructor(read: (read: HeadRead, id: string) => Promise<HeadAnswer>, strategy: Strategy) {
    this.#read = (head, id) => {
      const answer = read(head, id);
      answer.then(undefined, (error: unknown) => {
        if (!(error instanceof UpstreamError && error.code === 'NOT_FOUND')) return;
        this.#gone ??= new Set();
        this.#gone.add(id);
      });
      return answer;
    };
    this.#strategy = strategy;
  }

  /** The heads a read of this request found gone: what the response cache evicts, as a deletion's write would. */
  gone(): readonly string[] {
    return this.#gone === undefined ? [] : [...this.#gone];
  }

  /**
   * The head, with the reads of what `needs` asks started (merged with the other loads of this
   * tick). It answers once those reads are in: a field whose read failed fails alone (`with`),
   * and a head fails only when no read of it answered.
   */
  load(id: string, needs: Needs): HeadRecord | Promise<HeadRecord> {
    const record = this.#records.get(id);
    let wanted = (needs | Need.head) & HEAD_NEEDS;
    // Hair B fields of a head known to have no hair need no read.
    if (record?.known && !record.head.hair) wanted &= ~Need.hairB;
    if (record !== undefined && (record.carried & wanted) === wanted) return record.settled();
    // Made on first use; not cached by key: the records are the cache, and loads merge by head.
    this.#batches ??= new DataLoader((loads) => this.#loadBatch(loads), { cache: false });
    return this.#batches.load({ id, needs: wanted });
  }

  /** One part of the head: at once when it is read (the plan loaded it), else once its read answers. */
  part<P extends HeadPart>(record: HeadRecord, part: P): HeadPartValues[P] | Promise<HeadPartValues[P]> {
    const loaded = this.with(record, Need[part]);
    return loaded instanceof Promise ? loaded.then((head) => head.part(part)) : loaded.part(part);
  }

  /** The head with `need` read too: at once when it is (the plan loaded it), else once its read answers. */
  with(record: HeadRecord, need: Needs): HeadRecord | Promise<HeadRecord> {
    if ((record.available & need) === need) return record;
    if ((record.carried & need) === need) return record.ready(need);
    const loaded = this.load(record.id, need);
    return loaded instanceof Promise ? loaded.then((head) => head.ready(need)) : loaded.ready(need);
  }

  /**
   * Carries out reads the plan decided for a head (plan/operation-plan.ts): each read that still
   * brings something its fields need, less what the request already holds (a head listed twice,
   * Hair B of a head known to have no hair). Its fields wait for the parts they need.
   */
  carryOut(id: string, planned: HeadReads): HeadRecord {
    const record = this.#record(id);
    let missing = planned.needs & HEAD_NEEDS & ~record.carried;
    if (record.known && !record.head.hair) missing &= ~Need.hairB;
    const reads = planned.reads.filter(({ brings }) => brings & missing).map(({ read }) => read);
    if (reads.length > 0) record.start(reads.map((read) => ({ bits: carries[read], answer: this.#read(read, id) })));
    return record;
  }

  /**
   * The same for a deferred fragment's reads: started after this tick's, never in their way; failures are its fields'.
   */
  carryOutLater(id: string, planned: HeadReads): void {
    if (planned.reads.length === 0) return;
    setImmediate(() => this.carryOut(id, planned));
  }

  /**
   * A Get Heads Ext window under way carries these heads' variant B and head_metadata: their
   * fields wait for it rather than read each head. A head the window turns out not to hold (the
   * listings disagree) is read by id instead.
   */
  expectFromExtListing(
    records: readonly HeadRecord[],
    window: Promise<{ readonly items: readonly HeadRecord[] }>,
  ): void {
    const bits = carries.listHeadsExt;
    for (const record of records) {
      if ((record.carried & bits) === bits) continue;
      const answer = window.then(({ items }): HeadAnswer | Promise<HeadAnswer> => {
        const listed = items.find((item) => item.id === record.id);
        return listed !== undefined && listed.available & Need.hairB
          ? { variant: 'B', head: listed.part('hairB') }
          : this.#read('getHeadExtById', record.id);
      });
      record.start([{ bits, answer }]);
    }
  }

  /** A head a listing or an update answered, with what that read carries. */
  seed(answer: HeadAnswer, read: HeadSourceRead): HeadRecord {
    const record = this.#record(answer.head.id);
    record.receive(carries[read], answer);
    return record;
  }

  /** After an update or a delete: nothing read of the head earlier in the request holds now. */
  /** The heads this request has records of: every head it read, by id or in a listing (what a live query watches). */
  ids(): string[] {
    return [...this.#records.keys()];
  }

  forget(id: string): void {
    this.#records.delete(id);
  }

  #record(id: string): HeadRecord {
    let record = this.#records.get(id);
    if (record === undefined) {
      record = new HeadRecord(id);
      this.#records.set(id, record);
    }
    return record;
  }

  #loadBatch(loads: readonly HeadLoad[]): Promise<(HeadRecord | Error)[]> {
    const merged = new Map<string, Needs>();
    for (const { id, needs } of loads) merged.set(id, (merged.get(id) ?? 0) | needs);
    for (const [id, needs] of merged) {
      const record = this.#record(id);
      const reads = chooseHeadReads(needs, record.carried, this.#strategy);
      record.start(reads.map(({ read }) => ({ bits: carries[read], answer: this.#read(read, id) })));
    }
    return Promise.all(
      loads.map(async ({ id }) => {
        try {
          return await this.#records.get(id)!.settled();
        } catch (error) {
          return error as Error;
        }
      }),
    );
  }
}
