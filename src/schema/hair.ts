import { assetStyles, genders, hairDefaults, type PayableDataDto, sourceTypes } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { AssetStyle, Gender, knownOrNull, SourceType } from './enums.js';
import { type HairOfHead, hairCarriedBy } from './head-parts.js';

/*
 * A hair resolves to its head's record and the hair every read of it carries: Hair A's own
 * fields come with the head's variant A reads, Hair B's with its variant B reads.
 */

export const PayableDataRef = builder.objectRef<PayableDataDto>('PayableData').implement({
  description: 'The price of a payable asset.',
  fields: (t) => ({
    price: t.exposeFloat('price', { description: 'Price of the asset.' }),
    description: t.string({
      nullable: true,
      description: 'What the price buys.',
      resolve: (p) => p.description ?? null,
    }),
  }),
});

export const HairRef = builder.objectRef<HairOfHead>('Hair').implement({
  description:
    'A hair asset attached to a head. The upstream has two shapes of hair (variants A and B); this type merges them: the operation reads the head through whichever reads carry the fields it selects.',
  fields: (t) => ({
    id: t.field({ type: 'UUID', description: 'The hair UUID.', resolve: (h) => h.hair.id }),
    name: t.string({ description: 'Display name (at most 100 characters).', resolve: (h) => h.hair.name }),
    url: t.field({ type: 'URL', description: 'Address of the hair asset file.', resolve: (h) => h.hair.url }),
    thumbnailUrl: t.string({
      nullable: true,
      description: 'Address of a preview image.',
      resolve: (h) => h.hair.thumbnail_url ?? null,
    }),
    style: t.field({
      type: AssetStyle,
      nullable: true,
      description: 'Art style; the upstream default is PHR.',
      resolve: (h, _, ctx) => knownOrNull(assetStyles, h.hair.style ?? hairDefaults.style, 'Hair.style', ctx.logger),
    }),
    createdAt: t.field({
      type: 'DateTime',
      description: 'When the hair was created.',
      resolve: (h) => h.hair.created_at,
    }),
    sourceType: t.field({
      type: SourceType,
      nullable: true,
      description: 'Where the hair comes from; the upstream default is CUSTOM. (Hair A field.)',
      ...hairCarriedBy('variantA', (a, ctx) =>
        knownOrNull(sourceTypes, a.source_type ?? hairDefaults.sourceType, 'Hair.sourceType', ctx.logger),
      ),
    }),
    gender: t.field({
      type: Gender,
      nullable: true,
      description: 'The gender the hair is made for. (Hair A field.)',
      ...hairCarriedBy('variantA', (a, ctx) => knownOrNull(genders, a.gender, 'Hair.gender', ctx.logger)),
    }),
    objMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the 3D object; structure not specified by the contract. (Hair A field.)',
      ...hairCarriedBy('variantA', (a) => a.obj_metadata ?? null),
    }),
    payableData: t.field({
      type: PayableDataRef,
      nullable: true,
      description: 'Price, for payable hair. (Hair A field.)',
      ...hairCarriedBy('variantA', (a) => a.payable_data ?? null),
    }),
    updatedAt: t.string({
      nullable: true,
      description:
        'When the hair last changed, as the upstream wrote it (format not specified by the contract). (Hair A field.)',
      ...hairCarriedBy('variantA', (a) => a.updated_at ?? null),
    }),
    hairMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the hair; structure not specified by the contract. (Hair B field.)',
      ...hairCarriedBy('hairB', (b) => b.hair_metadata ?? null),
    }),
    userId: t.string({
      nullable: true,
      description: 'The user the hair belongs to. (Hair B field.)',
      ...hairCarriedBy('hairB', (b) => b.user_id ?? null),
    }),
  }),
});
