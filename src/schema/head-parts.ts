import { type HeadPart, Need } from '../domain/needs.js';
import type { HeadPartValues, HeadRecord } from '../loaders/head-records.js';
import { needs } from '../plan/facts.js';
import type { HairADto, HairBDto } from '../upstream/schemas.js';
import type { GatewayContext } from './context.js';

/*
 * Fields that a part of their head carries (domain/needs.ts: variant A, Hair B, head_metadata)
 * declare it in one place, the field itself: `...carriedBy('variantA', (a) => a.ar_url ?? null)`.
 * The need goes on the field's definition, where the plan reads it from the schema; the resolver
 * waits for that part (read already when the plan loaded it) and gets it typed.
 */

type Resolved<T> = T | Promise<T>;

const then = <A, B>(value: Resolved<A>, map: (value: A) => B): Resolved<B> =>
  value instanceof Promise ? value.then(map) : map(value);

/** A Head field carried by `part` of the head: its need, and a resolver reading it from that part. */
export function carriedBy<P extends HeadPart, T>(
  part: P,
  read: (value: HeadPartValues[P], context: GatewayContext) => T,
) {
  return {
    ...needs(Need[part]),
    resolve: (record: HeadRecord, _args: unknown, context: GatewayContext): Resolved<T> =>
      then(context.loaders.heads.part(record, part), (value) => read(value, context)),
  };
}

/** A hair as a Hair field resolves it: the head's record, and the hair every read of the head carries. */
export interface HairOfHead {
  readonly record: HeadRecord;
  readonly hair: NonNullable<HeadRecord['head']['hair']>;
}

/** Each hair variant, and which part of the head carries it. */
interface HairVariants {
  readonly variantA: HairADto;
  readonly hairB: HairBDto;
}

/** Where each hair variant is on the head part that carries it. */
const hairIn: { readonly [P in keyof HairVariants]: (head: HeadPartValues[P]) => HairVariants[P] | null | undefined } =
  {
    variantA: (head) => head.hair,
    hairB: (head) => head.hair,
  };

/**
 * A Hair field carried by one variant of the hair (Hair A with the head's variant A, Hair B with
 * its variant B reads): null when that read found another hair on the head (it changed between
 * the reads).
 */
export function hairCarriedBy<P extends keyof HairVariants, T>(
  part: P,
  read: (hair: HairVariants[P], context: GatewayContext) => T,
) {
  return {
    ...needs(Need[part]),
    resolve: ({ record, hair }: HairOfHead, _args: unknown, context: GatewayContext): Resolved<T | null> =>
      then(context.loaders.heads.part(record, part), (head) => {
        const variant = hairIn[part](head);
        return variant?.id === hair.id ? read(variant, context) : null;
      }),
  };
}
