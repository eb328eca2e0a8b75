import type { SeedHair, SeedHead, SeedSubscription, SeedSubscriptionType } from './seed.js';

/*
 * Projections. Absent optional fields are written as null, as FastAPI serialises unset optionals;
 * head_metadata alone is left out of the non-extended shapes because the contract says it is
 * "only in the extended read".
 */

function hairA(hair: SeedHair) {
  return {
    name: hair.name,
    source_type: hair.source_type,
    obj_metadata: hair.obj_metadata,
    style: hair.style,
    gender: hair.gender,
    id: hair.id,
    url: hair.url,
    thumbnail_url: hair.thumbnail_url ?? null,
    payable_data:
      hair.payable_data === undefined
        ? null
        : { price: hair.payable_data.price, description: hair.payable_data.description ?? null },
    created_at: hair.created_at,
    updated_at: hair.updated_at ?? null,
  };
}

function hairB(hair: SeedHair) {
  return {
    name: hair.name,
    url: hair.url,
    hair_metadata: hair.hair_metadata,
    user_id: hair.user_id ?? null,
    thumbnail_url: hair.thumbnail_url ?? null,
    style: hair.style,
    id: hair.id,
    created_at: hair.created_at,
  };
}

/** A head as the contract's variant A (2.1) or B (2.3) reads it, with head_metadata in the extended reads. */
export function headDto(
  head: Readonly<SeedHead>,
  hair: SeedHair | undefined,
  variantA: boolean,
  extended: boolean,
): Record<string, unknown> {
  const dto: Record<string, unknown> = {
    name: head.name,
    output_format: head.output_format ?? null,
    style: head.style ?? null,
    version: head.version ?? null,
    id: head.id,
    url: head.url,
    created_at: head.created_at,
  };
  if (variantA) {
    dto.updated_at = head.updated_at;
    dto.hair = hair === undefined ? null : hairA(hair);
    dto.lod = head.lod ?? null;
    dto.ar_url = head.ar_url ?? null;
  } else {
    dto.hair = hair === undefined ? null : hairB(hair);
    dto.lod = head.lod ?? null;
  }
  if (extended) dto.head_metadata = head.head_metadata;
  return dto;
}

/** A subscription with its type, as Update Subscription answers it. */
export function subscriptionDto(
  subscription: Readonly<SeedSubscription>,
  type: Readonly<SeedSubscriptionType>,
): Record<string, unknown> {
  return {
    id: subscription.id,
    organization_id: subscription.organization_id,
    platform_type: subscription.platform_type,
    expire_at: subscription.expire_at ?? null,
    active: subscription.active,
    created_at: subscription.created_at,
    updated_at: subscription.updated_at,
    subscription_type: {
      id: type.id,
      name: type.name,
      tag: type.tag,
      description: type.description,
      statement_descriptor: type.statement_descriptor ?? null,
      avatar_limit: type.avatar_limit ?? null,
      user_limit: type.user_limit ?? null,
      price: type.price,
      payment_cycle: type.payment_cycle,
      type: type.type ?? null,
    },
  };
}
