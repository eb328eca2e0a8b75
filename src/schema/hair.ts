import type { GatewayContext } from './context.js';
import type { HeadRecord } from '../loaders/head-records.js';
import { needs } from '../plan/facts.js';
import { Need } from '../domain/needs.js';
import { assetStyles, genders, hairDefaults, sourceTypes, type HairADto, type HairBDto, type PayableDataDto } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { AssetStyle, Gender, knownOrNull, SourceType } from './enums.js';

/*
 * A hair resolves to its head's record: Hair A comes with the head's variant A reads, Hair B
 * with its variant B reads, and the fields both carry with whichever came first.
 */

const hairOf = (record: HeadRecord) => record.head!.hair!;

/** Hair A of the head (its variant A read), if it is still the same hair. */
async function hairA(record: HeadRecord, context: GatewayContext): Promise<HairADto | undefined> {
  const hair = (await context.loaders.heads.with(record, Need.variantA)).a!.hair;
  return hair?.id === hairOf(record).id ? hair : undefined;
}

/** Hair B of the head (its variant B read), if it is still the same hair. */
async function hairB(record: HeadRecord, context: GatewayContext): Promise<HairBDto | undefined> {
  const hair = (await context.loaders.heads.with(record, Need.hairB)).b!.hair;
  return hair?.id === hairOf(record).id ? hair : undefined;
}

export const PayableDataRef = builder.objectRef<PayableDataDto>('PayableData').implement({
  description: 'The price of a payable asset.',
  fields: (t) => ({
    price: t.exposeFloat('price', { description: 'Price of the asset.' }),
    description: t.string({ nullable: true, description: 'What the price buys.', resolve: (p) => p.description ?? null }),
  }),
});

export const HairRef = builder.objectRef<HeadRecord>('Hair').implement({
  description:
    'A hair asset attached to a head. The upstream has two shapes of hair (variants A and B); this type merges them: the operation reads the head through whichever reads carry the fields it selects.',
  fields: (t) => ({
    id: t.field({ type: 'UUID', description: 'The hair UUID.', resolve: (r) => hairOf(r).id }),
    name: t.string({ description: 'Display name (at most 100 characters).', resolve: (r) => hairOf(r).name }),
    url: t.field({ type: 'URL', description: 'Address of the hair asset file.', resolve: (r) => hairOf(r).url }),
    thumbnailUrl: t.string({ nullable: true, description: 'Address of a preview image.', resolve: (r) => hairOf(r).thumbnail_url ?? null }),
    style: t.field({
      type: AssetStyle,
      nullable: true,
      description: 'Art style; the upstream default is PHR.',
      resolve: (r, _, ctx) => knownOrNull(assetStyles, hairOf(r).style ?? hairDefaults.style, 'Hair.style', ctx.logger),
    }),
    createdAt: t.field({ type: 'DateTime', description: 'When the hair was created.', resolve: (r) => hairOf(r).created_at }),
    sourceType: t.field({
      type: SourceType,
      nullable: true,
      description: 'Where the hair comes from; the upstream default is CUSTOM. (Hair A field.)',
      ...needs(Need.variantA),
      resolve: async (r, _, ctx) => {
        const hair = await hairA(r, ctx);
        return hair === undefined ? null : knownOrNull(sourceTypes, hair.source_type ?? hairDefaults.sourceType, 'Hair.sourceType', ctx.logger);
      },
    }),
    gender: t.field({
      type: Gender,
      nullable: true,
      description: 'The gender the hair is made for. (Hair A field.)',
      ...needs(Need.variantA),
      resolve: async (r, _, ctx) => knownOrNull(genders, (await hairA(r, ctx))?.gender, 'Hair.gender', ctx.logger),
    }),
    objMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the 3D object; structure not specified by the contract. (Hair A field.)',
      ...needs(Need.variantA),
      resolve: async (r, _, ctx) => (await hairA(r, ctx))?.obj_metadata ?? null,
    }),
    payableData: t.field({
      type: PayableDataRef,
      nullable: true,
      description: 'Price, for payable hair. (Hair A field.)',
      ...needs(Need.variantA),
      resolve: async (r, _, ctx) => (await hairA(r, ctx))?.payable_data ?? null,
    }),
    updatedAt: t.string({
      nullable: true,
      description: 'When the hair last changed, as the upstream wrote it (format not specified by the contract). (Hair A field.)',
      ...needs(Need.variantA),
      resolve: async (r, _, ctx) => (await hairA(r, ctx))?.updated_at ?? null,
    }),
    hairMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the hair; structure not specified by the contract. (Hair B field.)',
      ...needs(Need.hairB),
      resolve: async (r, _, ctx) => (await hairB(r, ctx))?.hair_metadata ?? null,
    }),
    userId: t.string({
      nullable: true,
      description: 'The user the hair belongs to. (Hair B field.)',
      ...needs(Need.hairB),
      resolve: async (r, _, ctx) => (await hairB(r, ctx))?.user_id ?? null,
    }),
  }),
});
