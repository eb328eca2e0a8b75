import type { GatewayContext } from '../context.js';
import { assetStyles, genders, hairDefaults, sourceTypes, type HairADto, type HairBDto, type PayableDataDto } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { AssetStyle, Gender, knownOrNull, SourceType } from './enums.js';

/**
 * A hair as some read of its head returned it. Hair A and Hair B carry different fields; the
 * variant says which we hold, and the head id lets a field the variant lacks be completed
 * through the matching read of the head (deduplicated per request).
 */
export type HairSource =
  | { readonly variant: 'A'; readonly hair: HairADto; readonly headId: string }
  | { readonly variant: 'B'; readonly hair: HairBDto; readonly headId: string };

/** Hair A of the head, from its variant A fields (read once per request) when the parent is Hair B. */
async function hairA(source: HairSource, context: GatewayContext): Promise<HairADto | undefined> {
  if (source.variant === 'A') return source.hair;
  const head = await context.loaders.headA.load(source.headId);
  return head.hair?.id === source.hair.id ? head.hair : undefined;
}

/** Hair B of the head, from its variant B fields (read once per request) when the parent is Hair A. */
async function hairB(source: HairSource, context: GatewayContext): Promise<HairBDto | undefined> {
  if (source.variant === 'B') return source.hair;
  const head = await context.loaders.headB.load(source.headId);
  return head.hair?.id === source.hair.id ? head.hair : undefined;
}

export const PayableDataRef = builder.objectRef<PayableDataDto>('PayableData').implement({
  description: 'The price of a payable asset.',
  fields: (t) => ({
    price: t.exposeFloat('price', { description: 'Price of the asset.' }),
    description: t.string({ nullable: true, description: 'What the price buys.', resolve: (p) => p.description ?? null }),
  }),
});

export const HairRef = builder.objectRef<HairSource>('Hair').implement({
  description:
    'A hair asset attached to a head. The upstream has two shapes of hair (variants A and B); this type merges them, and a field the fetched shape lacks is completed on demand by one more read of the head.',
  fields: (t) => ({
    id: t.field({ type: 'UUID', description: 'The hair UUID.', resolve: (s) => s.hair.id }),
    name: t.string({ description: 'Display name (at most 100 characters).', resolve: (s) => s.hair.name }),
    url: t.field({ type: 'URL', description: 'Address of the hair asset file.', resolve: (s) => s.hair.url }),
    thumbnailUrl: t.string({ nullable: true, description: 'Address of a preview image.', resolve: (s) => s.hair.thumbnail_url ?? null }),
    style: t.field({
      type: AssetStyle,
      nullable: true,
      description: 'Art style; the upstream default is PHR.',
      resolve: (s, _, ctx) => knownOrNull(assetStyles, s.hair.style ?? hairDefaults.style, 'Hair.style', ctx.logger),
    }),
    createdAt: t.field({ type: 'DateTime', description: 'When the hair was created.', resolve: (s) => s.hair.created_at }),
    sourceType: t.field({
      type: SourceType,
      nullable: true,
      description: 'Where the hair comes from; the upstream default is CUSTOM. (Hair A field.)',
      resolve: async (s, _, ctx) => {
        const hair = await hairA(s, ctx);
        return hair === undefined ? null : knownOrNull(sourceTypes, hair.source_type ?? hairDefaults.sourceType, 'Hair.sourceType', ctx.logger);
      },
    }),
    gender: t.field({
      type: Gender,
      nullable: true,
      description: 'The gender the hair is made for. (Hair A field.)',
      resolve: async (s, _, ctx) => knownOrNull(genders, (await hairA(s, ctx))?.gender, 'Hair.gender', ctx.logger),
    }),
    objMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the 3D object; structure not specified by the contract. (Hair A field.)',
      resolve: async (s, _, ctx) => (await hairA(s, ctx))?.obj_metadata ?? null,
    }),
    payableData: t.field({
      type: PayableDataRef,
      nullable: true,
      description: 'Price, for payable hair. (Hair A field.)',
      resolve: async (s, _, ctx) => (await hairA(s, ctx))?.payable_data ?? null,
    }),
    updatedAt: t.string({
      nullable: true,
      description: 'When the hair last changed, as the upstream wrote it (format not specified by the contract). (Hair A field.)',
      resolve: async (s, _, ctx) => (await hairA(s, ctx))?.updated_at ?? null,
    }),
    hairMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the hair; structure not specified by the contract. (Hair B field.)',
      resolve: async (s, _, ctx) => (await hairB(s, ctx))?.hair_metadata ?? null,
    }),
    userId: t.string({
      nullable: true,
      description: 'The user the hair belongs to. (Hair B field.)',
      resolve: async (s, _, ctx) => (await hairB(s, ctx))?.user_id ?? null,
    }),
  }),
});
