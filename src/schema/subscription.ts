import { z } from 'zod';
import { plan } from '../plan/facts.js';
import {
  paymentCycles,
  platformTypes,
  type SubscriptionDto,
  type SubscriptionTypeDto,
  type UpdateSubscriptionBody,
} from '../upstream/schemas.js';
import { updateSubscription } from '../upstream/subscriptions.js';
import { builder } from './builder.js';
import { knownOrFail, PaymentCycle, PlatformType } from './enums.js';
import { anyFieldGiven } from './mutation-inputs.js';

export const SubscriptionTypeRef = builder.objectRef<SubscriptionTypeDto>('SubscriptionType').implement({
  description: 'A plan an organization can subscribe to.',
  fields: (t) => ({
    id: t.field({ type: 'UUID', description: 'The subscription type UUID.', resolve: (s) => s.id }),
    name: t.exposeString('name', { description: 'Display name.' }),
    tag: t.exposeString('tag', { description: 'Short machine-friendly tag.' }),
    description: t.exposeString('description', { description: 'What the plan offers.' }),
    statementDescriptor: t.string({
      nullable: true,
      description: 'Text on card statements (at most 22 characters).',
      resolve: (s) => s.statement_descriptor ?? null,
    }),
    avatarLimit: t.float({
      nullable: true,
      description: 'How many avatars the plan allows.',
      resolve: (s) => s.avatar_limit ?? null,
    }),
    userLimit: t.float({
      nullable: true,
      description: 'How many users the plan allows.',
      resolve: (s) => s.user_limit ?? null,
    }),
    price: t.exposeFloat('price', { description: 'Price per payment cycle.' }),
    paymentCycle: t.field({
      type: PaymentCycle,
      description: 'How often the plan is billed.',
      resolve: (s, _, ctx) => knownOrFail(paymentCycles, s.payment_cycle, 'SubscriptionType.paymentCycle', ctx.logger),
    }),
    type: t.field({
      type: 'JSON',
      nullable: true,
      description: 'Type label; allowed values are not specified by the contract.',
      resolve: (s) => s.type ?? null,
    }),
  }),
});

export const OrganizationSubscriptionRef = builder.objectRef<SubscriptionDto>('OrganizationSubscription').implement({
  description: "An organization's subscription to a plan.",
  fields: (t) => ({
    id: t.field({ type: 'UUID', description: 'The subscription UUID.', resolve: (s) => s.id }),
    organizationId: t.field({
      type: 'UUID',
      description: 'The organization that holds it.',
      resolve: (s) => s.organization_id,
    }),
    platformType: t.field({
      type: PlatformType,
      description: 'Public or private platform.',
      resolve: (s, _, ctx) =>
        knownOrFail(platformTypes, s.platform_type, 'OrganizationSubscription.platformType', ctx.logger),
    }),
    expireAt: t.string({
      nullable: true,
      description: 'When it expires, as the upstream wrote it (format not specified by the contract).',
      resolve: (s) => s.expire_at ?? null,
    }),
    active: t.exposeBoolean('active', { description: 'Whether it is active.' }),
    createdAt: t.field({ type: 'DateTime', description: 'When it was created.', resolve: (s) => s.created_at }),
    updatedAt: t.field({ type: 'DateTime', description: 'When it last changed.', resolve: (s) => s.updated_at }),
    subscriptionType: t.field({
      type: SubscriptionTypeRef,
      description: 'The plan.',
      resolve: (s) => s.subscription_type,
    }),
  }),
});

const UpdateSubscriptionInput = builder.inputType('UpdateSubscriptionInput', {
  description: 'Changes to an organization subscription; give at least one field. Only the fields given are sent.',
  fields: (t) => ({
    organizationId: t.field({
      type: 'UUID',
      description: 'Which organization; the upstream picks the caller’s own when omitted.',
    }),
    platformType: t.field({ type: PlatformType, description: 'New platform type.' }),
    expireAt: t.string({
      description: 'New expiry, in the format the upstream expects.',
      validate: z.string().max(64),
    }),
    active: t.boolean({ description: 'Activate or deactivate.' }),
    subscriptionTypeId: t.field({ type: 'UUID', description: 'Switch to this plan.' }),
  }),
  validate: anyFieldGiven(
    ['organizationId', 'platformType', 'expireAt', 'active', 'subscriptionTypeId'],
    'Give at least one field to change',
  ),
});

const UpdateSubscriptionPayload = builder
  .objectRef<{ subscription: SubscriptionDto }>('UpdateSubscriptionPayload')
  .implement({
    description: 'The result of updateSubscription.',
    fields: (t) => ({
      subscription: t.field({
        type: OrganizationSubscriptionRef,
        description: 'The subscription as it is now.',
        resolve: (p) => p.subscription,
      }),
    }),
  });

builder.mutationField('updateSubscription', (t) =>
  t.field({
    type: UpdateSubscriptionPayload,
    description: "Changes an organization's subscription (Update Subscription). Sent once, never retried.",
    args: { input: t.arg({ type: UpdateSubscriptionInput, required: true, description: 'The changes.' }) },
    ...plan({ kind: 'call', operation: 'updateSubscription', needsToken: false }),
    resolve: async (_, { input }, ctx) => {
      const body: UpdateSubscriptionBody = {
        organization_id: input.organizationId ?? undefined,
        platform_type: input.platformType ?? undefined,
        expire_at: input.expireAt ?? undefined,
        active: input.active ?? undefined,
        subscription_type_id: input.subscriptionTypeId ?? undefined,
      };
      return { subscription: await updateSubscription(ctx.upstream, body) };
    },
  }),
);
