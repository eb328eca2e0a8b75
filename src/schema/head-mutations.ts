import { z } from 'zod';
import type { HeadRecord } from '../loaders/head-records.js';
import { plan } from '../plan/facts.js';
import { updatePlan } from '../plan/operation-plan.js';
import { deleteHead, updateHead } from '../upstream/heads.js';
import type { UpdateHeadBody } from '../upstream/schemas.js';
import { builder } from './builder.js';
import { HeadRef } from './head.js';
import { headIdSchema, requireAuthorization } from './inputs.js';
import { anyFieldGiven } from './mutation-inputs.js';

const UpdateHeadInput = builder.inputType('UpdateHeadInput', {
  description: 'Changes to a head; give the id and at least one field. Only the fields given are sent.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'Global ID or UUID of the head.', validate: headIdSchema }),
    name: t.string({ description: 'New display name (at most 100 characters).', validate: z.string().min(1).max(100) }),
    outputFormat: t.field({ type: 'JSON', description: 'New format label.' }),
    style: t.field({ type: 'JSON', description: 'New style label.' }),
    version: t.field({ type: 'JSON', description: 'New version label.' }),
    headMetadata: t.field({ type: 'JSON', description: 'New head metadata.' }),
    hairId: t.field({ type: 'UUID', description: 'Attach this hair.' }),
    hairColor: t.string({ description: 'New hair color.', validate: z.string().max(64) }),
  }),
  validate: anyFieldGiven(
    ['name', 'outputFormat', 'style', 'version', 'headMetadata', 'hairId', 'hairColor'],
    'Give at least one field to change',
  ),
});

const DeleteHeadInput = builder.inputType('DeleteHeadInput', {
  description: 'Which head to delete.',
  fields: (t) => ({
    id: t.id({ required: true, description: 'Global ID or UUID of the head.', validate: headIdSchema }),
  }),
});

const UpdateHeadPayload = builder.objectRef<{ head: HeadRecord }>('UpdateHeadPayload').implement({
  description: 'The result of updateHead.',
  fields: (t) => ({ head: t.field({ type: HeadRef, description: 'The head as it is now.', resolve: (p) => p.head }) }),
});

const DeleteHeadPayload = builder.objectRef<{ uuid: string }>('DeleteHeadPayload').implement({
  description: 'The result of deleteHead.',
  fields: (t) => ({
    deletedHeadId: t.globalID({
      description: 'Global ID of the deleted head.',
      resolve: (p) => ({ type: 'Head', id: p.uuid }),
    }),
    deletedHeadUuid: t.field({ type: 'UUID', description: 'UUID of the deleted head.', resolve: (p) => p.uuid }),
  }),
});

builder.mutationFields((t) => ({
  updateHead: t.field({
    type: UpdateHeadPayload,
    description: 'Changes a head (Update Head). Sent once, never retried.',
    args: { input: t.arg({ type: UpdateHeadInput, required: true, description: 'The head and the changes.' }) },
    // A listing's answer changes with a head it does not hold (its `totalCount`, a search a new name enters).
    ...plan(
      { kind: 'headUpdate' },
      { head: 'input', types: ['HeadConnection'], given: { hairId: ['Hair'], hairColor: ['Hair'] } },
    ),
    resolve: async (_, { input }, ctx, info) => {
      // The validated id is the UUID (headIdSchema transforms); Pothos types it as the raw input.
      const id = String(input.id);
      const body: UpdateHeadBody = {
        name: input.name ?? undefined,
        output_format: input.outputFormat ?? undefined,
        style: input.style ?? undefined,
        version: input.version ?? undefined,
        head_metadata: input.headMetadata ?? undefined,
        hair_id: input.hairId ?? undefined,
        hair_color: input.hairColor ?? undefined,
      };
      const answer = await updateHead(ctx.upstream, id, body);
      // Nothing read of the head before the update holds now; its answer is a fresh Head A, and
      // what else the payload's fields need is read after it.
      ctx.loaders.heads.forget(id);
      const head = ctx.loaders.heads.seed({ variant: 'A', head: answer }, 'updateHead');
      const planned = updatePlan(ctx.plan, String(info.path.key));
      return {
        head: await (planned === undefined ? head : ctx.loaders.heads.carryOut(head.id, planned.after)).settled(),
      };
    },
  }),
  deleteHead: t.field({
    type: DeleteHeadPayload,
    description: 'Deletes a head (Delete Head). Needs a bearer token. Sent once, never retried.',
    args: { input: t.arg({ type: DeleteHeadInput, required: true, description: 'The head to delete.' }) },
    // It answers no Head for the cache to find: the head is named by its argument.
    ...plan(
      { kind: 'call', operation: 'deleteHead', needsToken: true },
      { head: 'input', deletes: true, types: ['HeadConnection'] },
    ),
    resolve: async (_, { input }, ctx) => {
      requireAuthorization(ctx);
      const id = String(input.id);
      await deleteHead(ctx.upstream, id);
      ctx.loaders.heads.forget(id);
      return { uuid: id };
    },
  }),
}));
