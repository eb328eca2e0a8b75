import { z } from 'zod';
import { Need } from '../domain/needs.js';
import { connectionArgsSchema, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../domain/pages.js';
import { HeadRecord } from '../loaders/head-records.js';
import { entity, needs, plan } from '../plan/facts.js';
import type { HeadListingPlan } from '../plan/listings.js';
import { listingPlan } from '../plan/operation-plan.js';
import type { HeadFilter, HeadListingSource } from '../plan/windows.js';
import { UpstreamError } from '../upstream/errors.js';
import { builder } from './builder.js';
import { type ListingReader, resolveWindowConnection, type WindowConnection } from './connections.js';
import type { GatewayContext } from './context.js';
import { HairRef } from './hair.js';
import { carriedBy } from './head-parts.js';
import { headIdSchema } from './inputs.js';

/**
 * A head resolves to the request's record of it (loaders/head-records.ts): what every read of it
 * carried. The operation's plan loaded what its fields need before they run; a field whose need
 * was not planned (a deferred fragment, say) loads it on demand.
 */
export const HeadRef = builder.objectRef<HeadRecord>('Head');

/**
 * One head by id: the loaders carry out the reads the plan decided for it, and start those of its
 * deferred fields beside them. A head the plan did not name (an operation run without one) is
 * read for what every read carries, and its fields load what they need as they run.
 */
export function loadHead(context: GatewayContext, id: string): HeadRecord | Promise<HeadRecord> {
  const planned = context.plan.heads.get(id);
  if (planned === undefined) return context.loaders.heads.load(id, Need.head);
  context.loaders.heads.carryOutLater(id, planned.deferred);
  return context.loaders.heads.carryOut(id, planned.now).settled();
}

/** A head as `loadHead` gives it, or null once a read found it gone (the upstream answered 404). */
export async function headOrGone(context: GatewayContext, id: string): Promise<HeadRecord | null> {
  try {
    return await loadHead(context, id);
  } catch (error) {
    if (error instanceof UpstreamError && error.code === 'NOT_FOUND') return null;
    throw error;
  }
}

/**
 * The reads the plan decided for the heads a listing answered: what their listing did not carry
 * (a filtered page's head_metadata, say), started now; and what their deferred fields need,
 * beside the answer: the window of Get Heads Ext, or reads per head.
 */
function completeListedHeads(
  context: GatewayContext,
  filter: HeadFilter,
  listing: HeadListingPlan,
  connection: WindowConnection<HeadRecord>,
): void {
  const heads = connection.edges.map((edge) => edge.node);
  for (const head of heads) context.loaders.heads.carryOut(head.id, listing.completion);
  if (listing.deferred === 0 || heads.length === 0) return;
  if (listing.deferredSource === 'ext') {
    const window = context.loaders.listHeadsExtWindow(filter.search, connection.offset, heads.length);
    window.catch(() => undefined); // the deferred fields report it
    context.loaders.heads.expectFromExtListing(heads, window);
  } else for (const head of heads) context.loaders.heads.carryOutLater(head.id, listing.deferredSource);
}

/** Where the `heads` connection reads, as its plan says (`plan/windows.ts`). */
function headsReader(
  context: GatewayContext,
  filter: HeadFilter,
  source: HeadListingSource,
): ListingReader<HeadRecord> {
  const { loaders } = context;
  const pages = (offset: number, size: number) => loaders.listHeadsWindow(filter, offset, size);
  const total = () => loaders.countHeads(filter);
  if (source === 'pages') return { window: pages, total, first: (size) => pages(0, size) };
  if (source === 'ext')
    return { window: (offset, size) => loaders.listHeadsExtWindow(filter.search, offset, size), total };
  return {
    // Both listings at once; the Ext rows fill the same records by id.
    async window(offset, size) {
      const [window] = await Promise.all([
        pages(offset, size),
        loaders.listHeadsExtWindow(filter.search, offset, size),
      ]);
      return window;
    },
    total,
  };
}

builder.node(HeadRef, {
  description: 'An avatar head: a 3D model with its format, style and version labels, and maybe an attached hair.',
  id: { description: 'Global ID (Relay); use `uuid` for the upstream identifier.', resolve: (r) => r.id },
  isTypeOf: (value) => value instanceof HeadRecord,
  // A supergraph references a head by its UUID (schema.subgraph.graphql: `@key(fields: "uuid")`).
  ...entity('uuid'),
  fields: (t) => ({
    uuid: t.field({ type: 'UUID', description: 'The head UUID in the upstream service.', resolve: (r) => r.id }),
    name: t.string({ description: 'Display name.', resolve: (r) => r.head.name }),
    url: t.field({ type: 'URL', description: 'Address of the head model file.', resolve: (r) => r.head.url }),
    arUrl: t.string({
      nullable: true,
      description: 'Address of the augmented-reality rendition, when there is one.',
      ...carriedBy('variantA', (a) => a.ar_url ?? null),
    }),
    outputFormat: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Format label; allowed values are not specified by the contract.',
      resolve: (r) => r.head.output_format ?? null,
    }),
    style: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Style label; allowed values are not specified by the contract.',
      resolve: (r) => r.head.style ?? null,
    }),
    version: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Version label; allowed values are not specified by the contract.',
      resolve: (r) => r.head.version ?? null,
    }),
    lod: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Level-of-detail data; structure not specified by the contract.',
      resolve: (r) => r.head.lod ?? null,
    }),
    headMetadata: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Metadata of the head; structure not specified by the contract. Only the extended reads carry it.',
      ...carriedBy('metadata', (metadata) => metadata),
    }),
    createdAt: t.field({
      type: 'DateTime',
      description: 'When the head was created.',
      resolve: (r) => r.head.created_at,
    }),
    updatedAt: t.field({
      type: 'DateTime',
      nullable: true,
      description: 'When the head last changed. Only the variant A reads carry it.',
      ...carriedBy('variantA', (a) => a.updated_at),
    }),
    hair: t.field({
      type: HairRef,
      nullable: true,
      description: 'The hair attached to the head, if any.',
      // A hair is read through its head's record: the variants of the head carry the variants of its hair.
      resolve: (record) => (record.head.hair ? { record, hair: record.head.hair } : null),
    }),
  }),
});

builder.queryFields((t) => ({
  head: t.field({
    type: HeadRef,
    nullable: true,
    description: 'One head, by its global ID or its raw UUID.',
    args: { id: t.arg.id({ required: true, description: 'Global ID or UUID of the head.', validate: headIdSchema }) },
    ...plan({ kind: 'head', arg: 'id', ids: 'head' }),
    resolve: (_, args, ctx) => loadHead(ctx, String(args.id)),
  }),
  heads: t.connection(
    {
      type: HeadRef,
      description: `Heads in listing order, paged forwards (\`first\`/\`after\`) or backwards (\`last\`/\`before\`); 1 to ${MAX_PAGE_SIZE} per page, ${DEFAULT_PAGE_SIZE} by default.`,
      args: {
        search: t.arg.string({
          description: 'Only heads whose name contains this text.',
          validate: z.string().max(200),
        }),
        style: t.arg.string({ description: 'Only heads with this style label.', validate: z.string().max(200) }),
      },
      validate: connectionArgsSchema,
      ...plan({ kind: 'headListing' }),
      resolve: async (_, args, ctx, info) => {
        const filter = { search: args.search ?? undefined, style: args.style ?? undefined };
        const listing = listingPlan(ctx.plan, String(info.path.key));
        const connection = await resolveWindowConnection(args, headsReader(ctx, filter, listing?.source ?? 'pages'));
        if (listing !== undefined) completeListedHeads(ctx, filter, listing, connection);
        return connection;
      },
    },
    {
      name: 'HeadConnection',
      description: 'A page of heads.',
      fields: (t) => ({
        totalCount: t.int({
          description: 'How many heads the whole listing has.',
          ...needs(Need.total),
          resolve: (c) => c.totalCount(),
        }),
      }),
    },
    { name: 'HeadEdge', description: 'A head and its cursor.' },
  ),
}));
