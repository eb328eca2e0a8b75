import type { ReferenceSeed } from './seed.js';

/** Contract 8: the limits that no data of the reference upstream may break. */
export const HAIR_NAME_MAX_LENGTH = 100;
export const STATEMENT_DESCRIPTOR_MAX_LENGTH = 22;

/** Pydantic counts characters, not UTF-16 units; an emoji is one character there. */
export function characterLength(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

export class SeedValidationError extends Error {
  override name = 'SeedValidationError';
}

/**
 * Refuses data the contract forbids, so that the reference upstream can never serve it: a client
 * tested against it must be able to trust the contract's limits.
 */
export function validateSeed(seed: ReferenceSeed): void {
  const problems: string[] = [];
  const hairIds = new Set<string>();
  for (const hair of seed.hairs) {
    if (characterLength(hair.name) > HAIR_NAME_MAX_LENGTH) {
      problems.push(`hair ${hair.id}: name longer than ${HAIR_NAME_MAX_LENGTH} characters`);
    }
    if (hairIds.has(hair.id)) problems.push(`hair ${hair.id}: duplicate id`);
    hairIds.add(hair.id);
  }
  const headIds = new Set<string>();
  for (const head of seed.heads) {
    if (headIds.has(head.id)) problems.push(`head ${head.id}: duplicate id`);
    headIds.add(head.id);
    if (head.hair_id !== undefined && !hairIds.has(head.hair_id))
      problems.push(`head ${head.id}: hair ${head.hair_id} not in the catalogue`);
  }
  const typeIds = new Set<string>();
  for (const type of seed.subscriptionTypes) {
    typeIds.add(type.id);
    if (
      type.statement_descriptor !== undefined &&
      characterLength(type.statement_descriptor) > STATEMENT_DESCRIPTOR_MAX_LENGTH
    ) {
      problems.push(
        `subscription type ${type.id}: statement_descriptor longer than ${STATEMENT_DESCRIPTOR_MAX_LENGTH} characters`,
      );
    }
  }
  for (const subscription of seed.subscriptions) {
    if (!typeIds.has(subscription.subscription_type_id)) {
      problems.push(`subscription ${subscription.id}: unknown subscription type ${subscription.subscription_type_id}`);
    }
  }
  if (problems.length > 0) throw new SeedValidationError(`invalid reference seed: ${problems.join('; ')}`);
}
