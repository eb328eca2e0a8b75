import { type SubscriptionDto, subscriptionSchema, type UpdateSubscriptionBody } from './schemas.js';
import type { UpstreamCaller } from './transport.js';

/** Update Subscription (contract 4.6): the body carries only the fields the caller gave. Never retried. */
export function updateSubscription(caller: UpstreamCaller, body: UpdateSubscriptionBody): Promise<SubscriptionDto> {
  return caller.call({ operation: 'updateSubscription', json: body, schema: subscriptionSchema });
}
