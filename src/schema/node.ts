import { z } from 'zod';
import { MAX_NODE_IDS, nodeIdFrom } from '../domain/ids.js';
import { items, plan } from '../plan/facts.js';
import { builder } from './builder.js';
import { loadHead } from './head.js';
import { invalidNodeIdAt, nodeIdSchema } from './inputs.js';

builder.queryFields((t) => ({
  node: t.field({
    type: builder.nodeInterfaceRef(),
    nullable: true,
    description: 'Fetches any object by its global ID (a head also by its raw UUID).',
    args: { id: t.arg.id({ required: true, description: 'A global ID, or a head UUID.', validate: nodeIdSchema }) },
    ...plan({ kind: 'head', arg: 'id', ids: 'node' }),
    // The validated id is the head UUID, or null for an ID of a type with no node here.
    resolve: (_, args, ctx) => {
      const id: unknown = args.id; // Pothos types the raw input; nodeIdSchema may have made it null
      return typeof id === 'string' ? loadHead(ctx, id) : null;
    },
  }),
  nodes: t.field({
    type: [builder.nodeInterfaceRef()],
    nullable: { list: false, items: true },
    description: `Fetches objects by their global IDs (heads also by raw UUIDs), in order; an ID that matches nothing gives null, one that is not an ID an error at its index. At most ${MAX_NODE_IDS}; the same ID twice is read once.`,
    args: {
      ids: t.arg.idList({
        required: true,
        description: `Global IDs or head UUIDs (at most ${MAX_NODE_IDS}).`,
        validate: z.array(z.string()).max(MAX_NODE_IDS),
      }),
    },
    ...items({ arg: 'ids' }, { kind: 'heads', arg: 'ids' }),
    resolve: (_, args, ctx) =>
      args.ids.map((raw, index) => {
        const id = nodeIdFrom(raw);
        // One bad ID is that item's error, not the whole field's: its siblings still resolve.
        if (id === undefined) return invalidNodeIdAt(['ids', index]);
        if (id === null) return null;
        // An item's failure is its value, never a rejection: graphql-jit 0.8 would put the null of a
        // rejected item at the end of the list (graphql-js completes an Error item as it would a rejection).
        const head = loadHead(ctx, id);
        return head instanceof Promise
          ? head.catch((error: unknown) => (error instanceof Error ? error : Promise.reject(error)))
          : head;
      }),
  }),
}));
