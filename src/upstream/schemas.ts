import { z } from 'zod';

/*
 * The upstream's data shapes (contract section 2), checked once at the boundary so that an
 * off-contract body is an UPSTREAM_ERROR in the upstream layer rather than a crash in a resolver.
 *
 * Two deliberate leniencies:
 * - Optional fields accept null as well as absence (FastAPI serialises unset optionals as null).
 * - Enum fields accept any string: a value outside a contract enum must not fail the whole head;
 *   the schema layer maps unknown values to null and logs a warning. The known values are
 *   exported below for that mapping.
 */

export const sourceTypes = [
  'custom',
  'default',
  'exclusive',
  'payable',
  'promotion',
  'designed',
  'external',
  'assembled',
  'generated',
] as const;
export const assetStyles = ['phr', 'vox', 'sca', 'crt'] as const;
export const genders = ['male', 'female'] as const;
export const userRoles = ['admin', 'mod', 'creator', 'default'] as const;
export const platformTypes = ['public', 'private'] as const;
export const paymentCycles = [1, 2, 3, 6, 12] as const;

export type SourceTypeValue = (typeof sourceTypes)[number];
export type AssetStyleValue = (typeof assetStyles)[number];
export type GenderValue = (typeof genders)[number];
export type UserRoleValue = (typeof userRoles)[number];
export type PlatformTypeValue = (typeof platformTypes)[number];
export type PaymentCycleValue = (typeof paymentCycles)[number];

const uuid = z.guid();
/**
 * Asset addresses reach browsers as links, so only http(s) ones pass (a `javascript:` URL is
 * off-contract for an asset file, not something to hand a client).
 */
const uri = z.string().regex(/^https?:\/\/[^\s/?#]+[^\s]*$/i, { error: 'Invalid http(s) URL' });
/** Counts a client reads as GraphQL Int (32-bit); a larger one is off-contract here, not a crash later. */
const count = z
  .number()
  .int()
  .nonnegative()
  .max(2 ** 31 - 1);
/**
 * An object whose inner structure the contract does not show (labels, metadata): checked to be
 * an object, not copied. A record schema would rebuild it key by key; a head carries six of them,
 * and on a 50-head page that was the largest single allocation of the request.
 */
const opaqueObject = z
  .custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), {
    error: 'Expected an object',
  })
  .meta({ type: 'object' }); // the same check in JSON Schema, for the compiled body check (body-check.ts)

/** A timestamp without an offset is read as UTC and given a `Z`. */
export const withUtcOffset = (timestamp: string): string =>
  /(?:[zZ]|[+-]\d\d:?\d\d)$/.test(timestamp) ? timestamp : `${timestamp}Z`;
/** The JSON Schema keyword by which the compiled body check (body-check.ts) applies `withUtcOffset`. */
export const utcOffsetKeyword = 'utcOffset';
/**
 * ISO 8601 timestamp, given an offset when it has none, so that the GraphQL DateTime scalar
 * (RFC 3339, offset required) can always serialise it.
 */
const dateTime = z.iso
  .datetime({ offset: true, local: true })
  .overwrite(withUtcOffset)
  .meta({ [utcOffsetKeyword]: true });
// null and absent are the same to every reader here (`?? null`), so no transform: each one costs
// a pipe per field per body, measurable on a 50-head page.
const optional = <T extends z.ZodType>(schema: T) => schema.nullish();
const enumValue = z.string();

/**
 * Contract defaults of optional hair enums, applied by their readers (`?? hairDefaults.style`).
 * Not a zod transform: each is a pipe per field per body whose intermediate results outlive
 * young-generation GCs (docs/performance.md#measured-reasons).
 */
export const hairDefaults = { sourceType: 'custom', style: 'phr' } as const;

export const payableDataSchema = z.object({
  price: z.number(),
  description: optional(z.string()),
});

export const hairASchema = z.object({
  name: z.string().max(100),
  source_type: optional(enumValue),
  obj_metadata: opaqueObject,
  style: optional(enumValue),
  gender: enumValue,
  id: uuid,
  url: uri,
  thumbnail_url: optional(z.string()),
  payable_data: optional(payableDataSchema),
  created_at: dateTime,
  updated_at: optional(z.string()),
});

export const hairBSchema = z.object({
  name: z.string(),
  url: uri,
  hair_metadata: opaqueObject,
  user_id: optional(z.string()),
  thumbnail_url: optional(z.string()),
  style: optional(enumValue),
  id: uuid,
  created_at: dateTime,
});

const headCommon = {
  name: z.string(),
  output_format: optional(opaqueObject),
  style: optional(opaqueObject),
  version: optional(opaqueObject),
  id: uuid,
  url: uri,
  created_at: dateTime,
  lod: optional(opaqueObject),
  head_metadata: optional(opaqueObject),
};

/** Head variant A (contract 2.1); `head_metadata` only in the extended read. */
export const headASchema = z.object({
  ...headCommon,
  updated_at: dateTime,
  hair: optional(hairASchema),
  ar_url: optional(z.string()),
});

/** Head variant B (contract 2.3); `head_metadata` only in the extended reads. */
export const headBSchema = z.object({
  ...headCommon,
  hair: optional(hairBSchema),
});

export const permissionSchema = z.object({
  role: enumValue,
  id: uuid,
});

export const subscriptionTypeSchema = z.object({
  id: uuid,
  name: z.string(),
  tag: z.string(),
  description: z.string(),
  statement_descriptor: optional(z.string().max(22)),
  avatar_limit: optional(z.number()),
  user_limit: optional(z.number()),
  price: z.number(),
  payment_cycle: z.number(),
  type: optional(opaqueObject),
});

export const subscriptionSchema = z.object({
  id: uuid,
  organization_id: uuid,
  platform_type: enumValue,
  expire_at: optional(z.string()),
  active: z.boolean(),
  created_at: dateTime,
  updated_at: dateTime,
  subscription_type: subscriptionTypeSchema,
});

/** The page wrapper of Get Heads and Get Permissions (contract 2.8). */
export const pageSchema = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    total: count,
    page: count.positive(),
    size: count.positive(),
    pages: optional(count),
  });

export const headAPageSchema = pageSchema(headASchema);
export const permissionPageSchema = pageSchema(permissionSchema);
export const headBListSchema = z.array(headBSchema);

export const validationDetailSchema = z.object({
  loc: z.array(z.union([z.string(), z.number()])),
  msg: z.string(),
  type: z.string(),
});

/** FastAPI's validation error body (contract 7). */
export const validationErrorSchema = z.object({ detail: z.array(validationDetailSchema) });

export const loginResponseSchema = z.object({
  access_token: z.string().min(1),
  token_type: z.string(),
});

export type PayableDataDto = z.infer<typeof payableDataSchema>;
export type HairADto = z.infer<typeof hairASchema>;
export type HairBDto = z.infer<typeof hairBSchema>;
export type HeadADto = z.infer<typeof headASchema>;
export type HeadBDto = z.infer<typeof headBSchema>;
export type PermissionDto = z.infer<typeof permissionSchema>;
export type SubscriptionTypeDto = z.infer<typeof subscriptionTypeSchema>;
export type SubscriptionDto = z.infer<typeof subscriptionSchema>;
export type PageDto<T> = { items: T[]; total: number; page: number; size: number; pages?: number | null | undefined };
export type ValidationDetail = z.infer<typeof validationDetailSchema>;
export type LoginDto = z.infer<typeof loginResponseSchema>;

/** Update Head body (contract 4.3): only the fields the caller gave are sent. */
export interface UpdateHeadBody {
  name?: string;
  output_format?: unknown;
  style?: unknown;
  version?: unknown;
  head_metadata?: unknown;
  hair_id?: string;
  hair_color?: string;
}

/** Update Subscription body (contract 4.6): only the fields the caller gave are sent. */
export interface UpdateSubscriptionBody {
  organization_id?: string;
  platform_type?: string;
  expire_at?: string;
  active?: boolean;
  subscription_type_id?: string;
}
