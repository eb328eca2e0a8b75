import { brandWithType } from '@pothos/core';
import type { GatewayContext } from '../context.js';
import { builder } from './builder.js';
import { HeadRef, loadHead } from './head.js';
import { needsOfHeadField, type HeadNeeds } from './selection.js';
import { nodeIdSchema } from './inputs.js';

type NodeId = { typename: 'Head'; id: string } | undefined;

/** Loads what a global ID names (a Head, through the per-request loader); nothing for other IDs. */
async function loadNode(nodeId: NodeId, context: GatewayContext, needs: HeadNeeds | undefined) {
  if (nodeId === undefined) return null;
  const head = await loadHead(context, nodeId.id, needs);
  // The brand tells the Node interface which object type this is.
  brandWithType(head, HeadRef);
  return head;
}

builder.queryFields((t) => ({
  node: t.field({
    type: builder.nodeInterfaceRef(),
    nullable: true,
    description: 'Fetches any object by its global ID.',
    args: { id: t.arg.id({ required: true, description: 'A global ID.', validate: nodeIdSchema }) },
    resolve: (_, args, ctx, info) => loadNode(args.id as unknown as NodeId, ctx, ctx.planner ? needsOfHeadField(info.fieldNodes, info.fragments) : undefined),
  }),
  nodes: t.field({
    type: [builder.nodeInterfaceRef()],
    nullable: { list: false, items: true },
    description: 'Fetches objects by their global IDs, in order; an ID that matches nothing gives null.',
    args: { ids: t.arg.idList({ required: true, description: 'Global IDs (at most 100).', validate: nodeIdSchema.array().max(100) }) },
    resolve: (_, args, ctx, info) => {
      const needs = ctx.planner ? needsOfHeadField(info.fieldNodes, info.fragments) : undefined;
      return (args.ids as unknown as NodeId[]).map((id) => loadNode(id, ctx, needs));
    },
  }),
}));
