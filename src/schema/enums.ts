import { GraphQLError } from 'graphql';
import type { Logger } from 'pino';
import { assetStyles, genders, paymentCycles, platformTypes, sourceTypes, userRoles } from '../upstream/schemas.js';
import { builder } from './builder.js';

/*
 * Contract enums. GraphQL names are upper case; each value's internal value is the upstream's
 * (`phr`, `12`), so mapping both ways is the enum type's own job.
 */

const upperValues = <T extends string | number>(values: readonly T[], name: (value: T) => string) =>
  Object.fromEntries(
    values.map((value) => [name(value), { value, description: `Upstream value \`${value}\`.` }]),
  ) as Record<string, { value: T; description: string }>;

export const SourceType = builder.enumType('SourceType', {
  description: 'Where a hair asset comes from (contract SourceTypes).',
  values: upperValues(sourceTypes, (v) => v.toUpperCase()),
});

export const AssetStyle = builder.enumType('AssetStyle', {
  description: 'The art style of an asset (contract AssetStyles).',
  values: upperValues(assetStyles, (v) => v.toUpperCase()),
});

export const Gender = builder.enumType('Gender', {
  description: 'The gender an asset is made for.',
  values: upperValues(genders, (v) => v.toUpperCase()),
});

export const UserRole = builder.enumType('UserRole', {
  description: 'A role a permission grants (contract UserRoles).',
  values: upperValues(userRoles, (v) => v.toUpperCase()),
});

export const PlatformType = builder.enumType('PlatformType', {
  description: 'Whether an organization subscription is public or private.',
  values: upperValues(platformTypes, (v) => v.toUpperCase()),
});

const cycleNames: Record<(typeof paymentCycles)[number], string> = {
  1: 'MONTHLY',
  2: 'BIMONTHLY',
  3: 'QUARTERLY',
  6: 'SEMIANNUAL',
  12: 'ANNUAL',
};

export const PaymentCycle = builder.enumType('PaymentCycle', {
  description: 'How often a subscription is billed; upstream sends the number of months (1, 2, 3, 6, 12).',
  values: upperValues(paymentCycles, (v) => cycleNames[v]),
});

/**
 * An upstream value outside a contract enum must not fail the whole object: the field goes null
 * and the deviation is logged, so operators see the upstream drifting from the contract.
 */
export function knownOrNull<T extends string | number>(
  allowed: readonly T[],
  value: string | number | undefined,
  where: string,
  logger: () => Logger,
): T | null {
  if (value === undefined) return null;
  if ((allowed as readonly (string | number)[]).includes(value)) return value as T;
  logger().warn(
    { field: where, value: String(value).slice(0, 64) },
    'upstream value outside the contract enum; field set to null',
  );
  return null;
}

/** The same for a non-null field: nothing sensible to return, so the field fails as UPSTREAM_ERROR. */
export function knownOrFail<T extends string | number>(
  allowed: readonly T[],
  value: string | number,
  where: string,
  logger: () => Logger,
): T {
  const known = knownOrNull(allowed, value, where, logger);
  if (known === null)
    throw new GraphQLError(`Upstream sent a ${where} outside the contract`, { extensions: { code: 'UPSTREAM_ERROR' } });
  return known;
}
