import type {
  AssetStyleValue,
  GenderValue,
  PaymentCycleValue,
  PlatformTypeValue,
  SourceTypeValue,
  UserRoleValue,
} from '../upstream/schemas.js';

/*
 * The records of the reference upstream's seed, in the shapes the store keeps them in: the
 * contract's variants of a head, a hair or a subscription are projected from them (projections.ts).
 * seed.ts builds them, and exports these types again for those that import them from there.
 */

/** A label object (format, style, version, subscription type kind); its inner shape is ours. */
export interface Label {
  label: string;
}

export interface PayableData {
  price: number;
  description?: string;
}

/**
 * One hair record from which both contract variants are projected: Hair A (2.2) reads
 * obj_metadata/source_type/gender/payable_data/updated_at, Hair B (2.4) reads hair_metadata/user_id.
 */
export interface SeedHair {
  id: string;
  name: string;
  source_type: SourceTypeValue;
  obj_metadata: Record<string, unknown>;
  style: AssetStyleValue;
  gender: GenderValue;
  url: string;
  thumbnail_url?: string;
  payable_data?: PayableData;
  created_at: string;
  updated_at?: string;
  hair_metadata: Record<string, unknown>;
  user_id?: string;
}

/** Seeded labels are `{label}`; Update Head may store any object there (the contract shows no structure). */
export type LabelObject = Label | Record<string, unknown>;

export interface SeedHead {
  id: string;
  name: string;
  output_format?: LabelObject;
  style?: LabelObject;
  version?: LabelObject;
  url: string;
  created_at: string;
  updated_at: string;
  /** Reference into the hair catalogue rather than an embedded copy: hair is an asset of its own. */
  hair_id?: string;
  lod?: Record<string, unknown>;
  ar_url?: string;
  head_metadata: Record<string, unknown>;
}

export interface SeedPermission {
  role: UserRoleValue;
  id: string;
}

export interface SeedSubscriptionType {
  id: string;
  name: string;
  tag: string;
  description: string;
  statement_descriptor?: string;
  avatar_limit?: number;
  user_limit?: number;
  price: number;
  payment_cycle: PaymentCycleValue;
  type?: Label;
}

export interface SeedOrganization {
  id: string;
  name: string;
}

export interface SeedSubscription {
  id: string;
  organization_id: string;
  platform_type: PlatformTypeValue;
  expire_at?: string;
  active: boolean;
  created_at: string;
  updated_at: string;
  subscription_type_id: string;
}

export interface SeedUser {
  id: string;
  username: string;
  password: string;
  role: UserRoleValue;
  organization_id?: string;
}

export interface ReferenceSeed {
  heads: SeedHead[];
  /** The hair catalogue: every hair attached to a seeded head plus a few unattached ones. */
  hairs: SeedHair[];
  permissions: SeedPermission[];
  subscriptionTypes: SeedSubscriptionType[];
  organizations: SeedOrganization[];
  subscriptions: SeedSubscription[];
  users: SeedUser[];
}
