import { z } from 'zod';
import type { GatewayContext } from '../context.js';
import type { HeadFacet, HeadsFilter } from '../loaders/request-loaders.js';
import type { HeadADto, HeadBDto } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { pagedSource, resolveWindowConnection, type WindowSource } from './connections.js';
import { HairRef, type HairSource } from './hair.js';
import { connectionArgsSchema, headIdSchema } from './inputs.js';
import { needsOfConnectionNodes, needsOfHeadField, type HeadNeeds } from './selection.js';

/**
 * A head as some read returned it. Variant A (listing, extended read, update) and variant B
 * (by-id reads) carry different fields; `extended` says whether head_metadata was part of the
 * read. A field the parent lacks is completed through the request's loaders.
 */
export type HeadSource =
  | { readonly variant: 'A'; readonly head: HeadADto; readonly extended: boolean }
  | { readonly variant: 'B'; readonly head: HeadBDto; readonly extended: boolean };

export const headFromListing = (head: HeadADto): HeadSource => ({ variant: 'A', head, extended: false });
const headFromExtendedRead = (head: HeadADto): HeadSource => ({ variant: 'A', head, extended: true });
const headFromVariantB = (head: HeadBDto, extended: boolean): HeadSource => ({ variant: 'B', head, extended });

/**
 * Reads one head by id. Without needs (planner off) it is the extended variant A read, which
 * answers every field but Hair B's. With them, the cheapest read that covers the selection:
 * Get Head By Id for the fields variant B has, its extended read when head_metadata is asked
 * too, the extended variant A read for variant A fields, and with Hair B fields as well both
 * reads at once — never more than two.
 */
export async function loadHead(context: GatewayContext, id: string, needs: HeadNeeds | undefined): Promise<HeadSource> {
  const { loaders } = context;
  if (needs === undefined) return headFromExtendedRead(await loaders.headExt.load(id));
  // What this request already read of the head (a listing, another field) answers for free.
  const knows = (facet: HeadFacet) => loaders.knows(facet, id);
  const metadataCovered = !needs.metadata || knows('headMetadata');
  if (needs.variantA) {
    // Started now so both reads are in flight together; the Hair B fields await it.
    if (needs.hairB) loaders.headB.load(id).catch(() => undefined);
    return knows('headA') && metadataCovered ? headFromListing(await loaders.headA.load(id)) : headFromExtendedRead(await loaders.headExt.load(id));
  }
  if (knows('headB') && metadataCovered) return headFromVariantB(await loaders.headB.load(id), false);
  return needs.metadata ? headFromVariantB(await loaders.headExtById.load(id), true) : headFromVariantB(await loaders.headB.load(id), false);
}

/**
 * Where `heads` reads from. Get Heads pages by default. When the items need head_metadata or
 * Hair B fields (and no style filter, which Get Heads Ext lacks), one Get Heads Ext call instead
 * of one more read per head; with variant A fields as well, both listings at once, joined by id.
 */
function headsSource(context: GatewayContext, filter: HeadsFilter, needs: HeadNeeds | undefined, last: number | null | undefined): WindowSource<HeadSource> {
  const { loaders } = context;
  const listing = pagedSource(
    async (offset, limit) => {
      const window = await loaders.listHeadsWindow(filter, offset, limit);
      return { items: window.items.map(headFromListing), total: window.total };
    },
    last,
  );
  if (needs === undefined || !(needs.metadata || needs.hairB) || filter.style !== undefined) return listing;
  return {
    async window(offset, limit) {
      if (!needs.variantA) {
        const window = await loaders.listHeadsExtWindow(filter.search, offset, limit);
        return { items: window.items.map((head) => headFromVariantB(head, true)), hasMore: window.hasMore };
      }
      const [window] = await Promise.all([listing.window(offset, limit), loaders.listHeadsExtWindow(filter.search, offset, limit)]);
      return window;
    },
    total: async () => ({ total: await loaders.countHeads(filter) }),
  };
}

/** Variant A fields (updated_at, ar_url) of a head that came from a variant B read. */
async function headA(source: HeadSource, context: GatewayContext): Promise<HeadADto> {
  return source.variant === 'A' ? source.head : context.loaders.headA.load(source.head.id);
}

export const HeadRef = builder.objectRef<HeadSource>('Head');

builder.node(HeadRef, {
  description: 'An avatar head: a 3D model with its format, style and version labels, and maybe an attached hair.',
  id: { description: 'Global ID (Relay); use `uuid` for the upstream identifier.', resolve: (s) => s.head.id },
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
      resolve: async (s, _, ctx) => (s.extended ? (s.head.head_metadata ?? null) : await ctx.loaders.headMetadata.load(s.head.id)),
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
    resolve: (_, args, ctx, info) => loadHead(ctx, args.id as unknown as string, ctx.planner ? needsOfHeadField(info.fieldNodes, info.fragments) : undefined),
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
      resolve: (_, args, ctx, info) => {
        const filter = { search: args.search ?? undefined, style: args.style ?? undefined };
        const needs = ctx.planner ? needsOfConnectionNodes(info.fieldNodes, info.fragments) : undefined;
        return resolveWindowConnection(args, headsSource(ctx, filter, needs, args.last));
      },
    },
    {
      name: 'HeadConnection',
      description: 'A page of heads.',
      fields: (t) => ({ totalCount: t.int({ description: 'How many heads the whole listing has.', resolve: (c) => c.totalCount() }) }),
    },
    { name: 'HeadEdge', description: 'A head and its cursor.' },
  ),
}));
