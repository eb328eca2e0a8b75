import { type PlatformTypeValue, platformTypes } from '../../upstream/schemas.js';
import { jsonObjectBody } from '../bodies.js';
import type { Exchange } from '../exchange.js';
import type { ReferenceStore, SubscriptionPatch } from '../store.js';
import { boolValue, enumValue, missing, stringValue, uuidValue, type ValidationIssue } from '../validation.js';
import { bearerUser, bodyLoc, given, type Handler, knownUuid, patchField } from './shared.js';

const SUBSCRIPTION_NOT_FOUND = JSON.stringify({ detail: 'Subscription not found' });

/** Update Subscription: of the organization in the body, or else of the caller's own. */
export const updateSubscription: Handler = (ex, store) => {
  const issues: ValidationIssue[] = [];
  const body = jsonObjectBody(ex.body, issues);
  if (body === undefined) return ex.sendIssues(issues);
  // Issues come in pydantic's order: organization_id first, the patch fields, then a missing organization.
  const organizationGiven = given(body, 'organization_id') !== undefined;
  let organizationId = organizationGiven
    ? uuidValue(given(body, 'organization_id'), bodyLoc('organization_id'), issues)
    : undefined;
  const patch = subscriptionPatch(body, store, issues);
  if (!organizationGiven) organizationId = callerOrganization(ex, store, body, issues);
  if (issues.length > 0 || organizationId === undefined) return ex.sendIssues(issues);
  const updated = store.updateSubscription(organizationId, patch);
  if (updated === undefined) return ex.send(404, SUBSCRIPTION_NOT_FOUND);
  ex.send(200, JSON.stringify(store.subscriptionDto(updated)));
};

/** Without organization_id in the body, the caller's own organization (an issue when there is no caller). */
function callerOrganization(
  ex: Exchange,
  store: ReferenceStore,
  body: Record<string, unknown>,
  issues: ValidationIssue[],
): string | undefined {
  const own = bearerUser(ex, store)?.organization_id;
  if (own === undefined) issues.push(missing(['body', 'organization_id'], body));
  return own;
}

function subscriptionPatch(
  body: Record<string, unknown>,
  store: ReferenceStore,
  issues: ValidationIssue[],
): SubscriptionPatch {
  const patch: SubscriptionPatch = {};
  patchField(
    patch,
    body,
    'platform_type',
    (input, loc, found) => enumValue<PlatformTypeValue>(input, platformTypes, loc, found),
    issues,
  );
  patchField(patch, body, 'expire_at', stringValue, issues);
  patchField(patch, body, 'active', boolValue, issues);
  patchField(
    patch,
    body,
    'subscription_type_id',
    knownUuid((id) => store.hasSubscriptionType(id), 'subscription type'),
    issues,
  );
  return patch;
}
