import { assetStyles, genders, sourceTypes, type UserRoleValue } from '../upstream/schemas.js';
import { SeedRandom } from './seed-random.js';
import type {
  ReferenceSeed,
  SeedHair,
  SeedHead,
  SeedOrganization,
  SeedPermission,
  SeedSubscription,
  SeedSubscriptionType,
  SeedUser,
} from './seed-records.js';

export type * from './seed-records.js';

/*
 * Deterministic seed data of the reference upstream. Everything derives from one seeded PRNG so
 * that tests, benchmarks and `npm start` without UPSTREAM_URL see the same heads, ids and orders
 * on every machine; the store deep-copies it per server.
 */

/** Login accounts of the reference upstream; the README and tests cite these. */
export const DEMO_USERNAME = 'demo';
export const DEMO_PASSWORD = 'demo-password';
export const ALICE_USERNAME = 'alice';
export const ALICE_PASSWORD = 'alice-password';
export const VIEWER_USERNAME = 'viewer';
export const VIEWER_PASSWORD = 'viewer-password';
/** Role admin, member of the first organization: may delete heads and update that subscription. */
export const DEMO_CREDENTIALS = { username: DEMO_USERNAME, password: DEMO_PASSWORD } as const;

export const HEAD_COUNT = 260;
export const PERMISSION_COUNT = 140;
export const UNATTACHED_HAIR_COUNT = 10;

const HEAD_WORDS = [
  'Aurora',
  'Basalt',
  'Cobalt',
  'Dune',
  'Ember',
  'Fjord',
  'Glacier',
  'Harbor',
  'Iris',
  'Juniper',
  'Kestrel',
  'Lumen',
  'Meridian',
  'Nimbus',
  'Onyx',
  'Prairie',
  'Quartz',
  'Raven',
  'Sierra',
  'Tundra',
  'Umber',
  'Vesper',
  'Willow',
  'Xenon',
  'Yarrow',
  'Zephyr',
] as const;
const OUTPUT_FORMATS = ['glb', 'fbx'] as const;
const HEAD_STYLES = ['realistic', 'cartoon', 'anime'] as const;
const VERSIONS = ['v1', 'v2'] as const;
const RIGS = ['arkit-52', 'basic-jaw', 'full-face', 'none'] as const;
const HAIR_TEXTURES = ['Wavy', 'Straight', 'Curly', 'Braided', 'Spiky', 'Tousled', 'Sleek', 'Coiled'] as const;
const HAIR_CUTS = [
  'Bob',
  'Pixie',
  'Undercut',
  'Ponytail',
  'Bun',
  'Mohawk',
  'Afro',
  'Fade',
  'Mullet',
  'Dreadlocks',
] as const;
const HAIR_COLORS = ['black', 'brown', 'blonde', 'auburn', 'red', 'grey', 'platinum', 'blue'] as const;
const SHADERS = ['strand-pbr', 'card-alpha', 'toon-ramp'] as const;

const SEED_EPOCH = Date.UTC(2024, 0, 1);
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();
const pad3 = (n: number) => String(n).padStart(3, '0');

function makeHair(rng: SeedRandom, index: number, createdMs: number, ownerIds: readonly string[]): SeedHair {
  const id = rng.uuid();
  // Cycling by index (not by chance) guarantees every SourceTypes value occurs.
  const sourceType = sourceTypes[index % sourceTypes.length]!;
  const hair: SeedHair = {
    id,
    name: `Hair ${pad3(index + 1)} ${rng.pick(HAIR_TEXTURES)} ${rng.pick(HAIR_CUTS)}`,
    source_type: sourceType,
    obj_metadata: { color: rng.pick(HAIR_COLORS), vertices: rng.int(2_000, 60_000) },
    style: assetStyles[rng.int(0, assetStyles.length - 1)]!,
    gender: genders[rng.int(0, 1)]!,
    url: `https://assets.example.com/hair/${id}.glb`,
    created_at: iso(createdMs),
    hair_metadata: { strands: rng.int(500, 20_000), shader: rng.pick(SHADERS) },
  };
  if (rng.chance(0.9)) hair.thumbnail_url = `https://assets.example.com/hair/${id}.png`;
  if (sourceType === 'payable' || sourceType === 'exclusive') {
    hair.payable_data = { price: rng.int(99, 1_999) / 100 };
    if (rng.chance(0.7)) hair.payable_data.description = `${hair.name} premium pack`;
  }
  if (rng.chance(0.9)) hair.updated_at = iso(createdMs + rng.int(1, 240) * HOUR);
  if (rng.chance(0.8)) hair.user_id = rng.pick(ownerIds);
  return hair;
}

/**
 * Builds the seed. The default seed value is what everything uses; another value is only for
 * tests that want different data of the same shape.
 */
export function createSeed(seedValue = 0x5eed_2024): ReferenceSeed {
  const rng = new SeedRandom(seedValue);

  const organizations: SeedOrganization[] = ['Northwind Studios', 'Lumen Labs', 'Kestrel Games'].map((name) => ({
    id: rng.uuid(),
    name,
  }));
  const users: SeedUser[] = [
    {
      id: rng.uuid(),
      username: DEMO_USERNAME,
      password: DEMO_PASSWORD,
      role: 'admin',
      organization_id: organizations[0]!.id,
    },
    {
      id: rng.uuid(),
      username: ALICE_USERNAME,
      password: ALICE_PASSWORD,
      role: 'creator',
      organization_id: organizations[1]!.id,
    },
    // No organization on purpose: Update Subscription with this user's token alone has nothing to select.
    { id: rng.uuid(), username: VIEWER_USERNAME, password: VIEWER_PASSWORD, role: 'default' },
  ];
  const ownerIds = [...users.map((u) => u.id), rng.uuid(), rng.uuid()];

  const hairs: SeedHair[] = [];
  const heads: SeedHead[] = [];
  let createdMs = SEED_EPOCH;
  for (let i = 0; i < HEAD_COUNT; i++) {
    // Every tenth head shares the previous timestamp so that the id tie-break of the order is exercised.
    if (i % 10 !== 9) createdMs += rng.int(1, 6) * HOUR;
    const id = rng.uuid();
    const head: SeedHead = {
      id,
      name: `Head ${pad3(i + 1)} ${rng.pick(HEAD_WORDS)}`,
      output_format: { label: rng.pick(OUTPUT_FORMATS) },
      version: { label: rng.pick(VERSIONS) },
      url: `https://assets.example.com/heads/${id}.glb`,
      created_at: iso(createdMs),
      updated_at: iso(createdMs + rng.int(0, 72) * HOUR),
      head_metadata: { polygons: rng.int(8_000, 48_000), rig: rng.pick(RIGS) },
    };
    // A few heads without style keep the optional field honest for clients and the style filter.
    if (i % 25 !== 24) head.style = { label: rng.pick(HEAD_STYLES) };
    if (i % 3 === 0) head.lod = { levels: 3, distances: [5, 15, 40] };
    if (i % 4 === 1) head.ar_url = `https://assets.example.com/heads/${id}.usdz`;
    // Exactly 17 in 20 heads wear hair (85%), spread so every page mixes both kinds.
    if (i % 20 !== 4 && i % 20 !== 11 && i % 20 !== 17) {
      const hair = makeHair(rng, hairs.length, createdMs - 24 * HOUR, ownerIds);
      hairs.push(hair);
      head.hair_id = hair.id;
    }
    heads.push(head);
  }
  for (let i = 0; i < UNATTACHED_HAIR_COUNT; i++) {
    hairs.push(makeHair(rng, hairs.length, SEED_EPOCH + i * HOUR, ownerIds));
  }

  const roles: readonly UserRoleValue[] = ['admin', 'mod', 'creator', 'default'];
  const permissions: SeedPermission[] = users.map((u) => ({ role: u.role, id: u.id }));
  while (permissions.length < PERMISSION_COUNT) {
    // Mostly ordinary users, like a real tenant; index cycling would make every page look alike.
    const role = rng.chance(0.55) ? 'default' : rng.pick(roles);
    permissions.push({ role, id: rng.uuid() });
  }

  const subscriptionTypes: SeedSubscriptionType[] = [
    {
      id: rng.uuid(),
      name: 'Starter',
      tag: 'starter',
      description: 'One creator, a handful of avatars.',
      statement_descriptor: 'AVATARHEADS STARTER',
      avatar_limit: 10,
      user_limit: 1,
      price: 9.99,
      payment_cycle: 1,
      type: { label: 'individual' },
    },
    {
      id: rng.uuid(),
      name: 'Studio',
      tag: 'studio',
      description: 'Small teams sharing a head library.',
      statement_descriptor: 'AVATARHEADS STUDIO',
      avatar_limit: 250,
      user_limit: 10,
      price: 79,
      payment_cycle: 3,
      type: { label: 'team' },
    },
    {
      // Exactly 22 characters: the contract's upper bound, so clients see the edge case.
      id: rng.uuid(),
      name: 'Enterprise',
      tag: 'enterprise',
      description: 'Unlimited avatars, SSO and support.',
      statement_descriptor: 'AVATARHEADS ENTERPRISE',
      user_limit: 500,
      price: 2400,
      payment_cycle: 12,
      type: { label: 'enterprise' },
    },
    {
      id: rng.uuid(),
      name: 'Education',
      tag: 'education',
      description: 'Discounted plan for schools.',
      avatar_limit: 50,
      price: 0,
      payment_cycle: 6,
    },
  ];

  const subscriptions: SeedSubscription[] = [
    { organization: 0, type: 2, platform_type: 'private' as const, active: true, expire_at: '2026-12-31T23:59:59Z' },
    { organization: 1, type: 1, platform_type: 'public' as const, active: true, expire_at: undefined },
    { organization: 2, type: 0, platform_type: 'public' as const, active: false, expire_at: '2024-06-30T00:00:00Z' },
  ].map((s, i) => {
    const subscription: SeedSubscription = {
      id: rng.uuid(),
      organization_id: organizations[s.organization]!.id,
      platform_type: s.platform_type,
      active: s.active,
      created_at: iso(SEED_EPOCH + i * 24 * HOUR),
      updated_at: iso(SEED_EPOCH + (i + 30) * 24 * HOUR),
      subscription_type_id: subscriptionTypes[s.type]!.id,
    };
    if (s.expire_at !== undefined) subscription.expire_at = s.expire_at;
    return subscription;
  });

  return { heads, hairs, permissions, subscriptionTypes, organizations, subscriptions, users };
}

let defaultSeed: ReferenceSeed | undefined;

/** The default seed, built once per process; callers must copy before mutating (the store does). */
export function referenceSeed(): ReferenceSeed {
  defaultSeed ??= createSeed();
  return defaultSeed;
}

/** Catalogue hairs no seeded head wears: attaching one changes a head visibly. */
export function unattachedHairIds(seed: ReferenceSeed = referenceSeed()): string[] {
  const worn = new Set(seed.heads.map((h) => h.hair_id));
  return seed.hairs.filter((h) => !worn.has(h.id)).map((h) => h.id);
}
