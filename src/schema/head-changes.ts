import { encodeGlobalID } from '@pothos/plugin-relay';
import type { HeadChange } from '../domain/head-changes.js';
import type { HeadRecord } from '../loaders/head-records.js';
import { plan } from '../plan/facts.js';
import { builder } from './builder.js';
import type { GatewayContext } from './context.js';
import { HeadRef, headOrGone } from './head.js';
import { headIdSchema } from './inputs.js';

/** The head as `head(id:)` reads it, or null once it is gone (a deletion, or a read answered 404). */
const headAfter = (change: HeadChange, context: GatewayContext): Promise<HeadRecord | null> | null =>
  change.deleted === true ? null : headOrGone(context, change.id);

const HeadChangeRef = builder.objectRef<HeadChange>('HeadChange').implement({
  description: 'A change to a head: made through the gateway, or found by its polling of the upstream.',
  fields: (t) => ({
    id: t.id({
      description: 'The global ID of the head that changed.',
      resolve: (change) => encodeGlobalID('Head', change.id),
    }),
    head: t.field({
      type: HeadRef,
      nullable: true,
      description:
        'The head as it is now, read with the subscriber’s token as `head(id:)` reads it; null once it is deleted (the stream then ends).',
      resolve: (change, _, context) => headAfter(change, context),
    }),
  }),
});

builder.subscriptionType({
  description:
    'Changes as they happen, over GraphQL over SSE (`Accept: text/event-stream`), Apollo’s multipart subscriptions (`Accept: multipart/mixed;subscriptionSpec="1.0"`) or WebSocket (`graphql-transport-ws`) on the GraphQL path.',
});

builder.subscriptionFields((t) => ({
  headChanged: t.field({
    type: HeadChangeRef,
    description:
      'Each change to one head, made through any replica of the gateway or elsewhere (found by polling the upstream): an event per change, none at the start. The stream ends after the head is deleted.',
    args: { id: t.arg.id({ required: true, description: 'Global ID or UUID of the head.', validate: headIdSchema }) },
    ...plan({ kind: 'head', arg: 'id', ids: 'head' }),
    subscribe: (_, args, context) => context.headChanges(String(args.id), context),
    resolve: (change) => change,
  }),
}));
