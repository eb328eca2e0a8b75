import { z } from 'zod';
import type { GatewayContext } from '../context.js';
import type { HeadADto, HeadBDto } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { resolveWindowConnection } from './connections.js';
import { HairRef, type HairSource } from './hair.js';
import { connectionArgsSchema, headIdSchema } from './inputs.js';

/**
 * A head as some read returned it. Variant A (listing, extended read, update) and variant B
 * (by-id reads) carry different fields; `extended` says whether head_metadata was part of the
 * read. A field the parent lacks is completed through the request's loaders.
 */
export type HeadSource =
  | { readonly variant: 'A'; readonly head: HeadADto; readonly extended: boolean }
  | { readonly variant: 'B'; readonly head: HeadBDto; readonly extended: boolean };

export const headFromListing = (head: HeadADto): HeadSource => ({ variant: 'A', head, extended: false });
export const headFromExtendedRead = (head: HeadADto): HeadSource => ({ variant: 'A', head, extended: true });

/** Variant A fields (updated_at, ar_url, Hair A) of a head that came from a variant B read. */
async function headA(source: HeadSource, context: GatewayContext): Promise<HeadADto> {
  return source.variant === 'A' ? source.head : context.loaders.headA.load(source.head.id);
}

export const HeadRef = builder.objectRef<HeadSource>('Head');

builder.node(HeadRef, {
  description: 'An avatar head: a 3D model with its format, style and version labels, and maybe an attached hair.',
  id: { description: 'Global ID (Relay); use `uuid` for the upstream identifier.', resolve: (s) => s.head.id },
  loadOne: async (id, context) => headFromExtendedRead(await context.loaders.headExt.load(id)),
  fields: (t) => ({
    uuid: t.field({ type: 'UUID', description: 'The head UUID in the upstream service.', resolve: (s) => s.head.id }),
    name: t.string({ description: 'Display name.', resolve: (s) => s.head.name }),
    url: t.field({ type: 'URL', description: 'Address of the head model file.', resolve: (s) => s.head.url }),
    arUrl: t.string({
      nullable: true,
      description: 'Address of the augmented-reality rendition, when there is one.',
      resolve: async (s, _, ctx) => (await headA(s, ctx)).ar_url ?? null,
    }),
    outputFormat: t.field({ type: 'JSON', nullable: true, description: 'Format label; allowed values are not specified by the contract.', resolve: (s) => s.head.output_format ?? null }),
    style: t.field({ type: 'JSON', nullable: true, description: 'Style label; allowed values are not specified by the contract.', resolve: (s) => s.head.style ?? null }),
    version: t.field({ type: 'JSON', nullable: true, description: 'Version label; allowed values are not specified by the contract.', resolve: (s) => s.head.version ?? null }),
    lod: t.field({ type: 'JSON', nullable: true, description: 'Level-of-detail data; structure not specified by the contract.', resolve: (s) => s.head.lod ?? null }),
    headMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the head; structure not specified by the contract. Completed through an extended read when the parent lacks it.',
      resolve: async (s, _, ctx) => (s.extended ? s.head : await ctx.loaders.headExt.load(s.head.id)).head_metadata ?? null,
    }),
    createdAt: t.field({ type: 'DateTime', description: 'When the head was created.', resolve: (s) => s.head.created_at }),
    updatedAt: t.field({
      type: 'DateTime',
      nullable: true,
      description: 'When the head last changed. Completed through the variant A read when the parent lacks it.',
      resolve: async (s, _, ctx) => (await headA(s, ctx)).updated_at,
    }),
    hair: t.field({
      type: HairRef,
      nullable: true,
      description: 'The hair attached to the head, if any.',
      resolve: (s): HairSource | null => {
        if (!s.head.hair) return null;
        return s.variant === 'A' ? { variant: 'A', hair: s.head.hair, headId: s.head.id } : { variant: 'B', hair: s.head.hair, headId: s.head.id };
      },
    }),
  }),
});

builder.queryFields((t) => ({
  head: t.field({
    type: HeadRef,
    nullable: true,
    description: 'One head, by its global ID or its raw UUID.',
    args: { id: t.arg.id({ required: true, description: 'Global ID or UUID of the head.', validate: headIdSchema }) },
    resolve: async (_, args, ctx) => headFromExtendedRead(await ctx.loaders.headExt.load(args.id as unknown as string)),
  }),
  heads: t.connection(
    {
      type: HeadRef,
      description: 'Heads in listing order, paged forwards (`first`/`after`) or backwards (`last`/`before`); 1 to 100 per page, 50 by default.',
      args: {
        search: t.arg.string({ description: 'Only heads whose name contains this text.', validate: z.string().max(200) }),
        style: t.arg.string({ description: 'Only heads with this style label.', validate: z.string().max(200) }),
      },
      validate: connectionArgsSchema,
      resolve: (_, args, ctx) =>
        resolveWindowConnection(args, async (offset, limit) => {
          const window = await ctx.loaders.listHeadsWindow({ search: args.search ?? undefined, style: args.style ?? undefined }, offset, limit);
          return { items: window.items.map(headFromListing), total: window.total };
        }),
    },
    {
      name: 'HeadConnection',
      description: 'A page of heads.',
      fields: (t) => ({ totalCount: t.exposeInt('totalCount', { description: 'How many heads the whole listing has.' }) }),
    },
    { name: 'HeadEdge', description: 'A head and its cursor.' },
  ),
}));
