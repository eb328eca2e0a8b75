import { randomBytes } from 'node:crypto';
import type { PlatformTypeValue } from '../upstream/schemas.js';
import { headDto, subscriptionDto } from './projections.js';
import {
  type LabelObject,
  type ReferenceSeed,
  referenceSeed,
  type SeedHair,
  type SeedHead,
  type SeedPermission,
  type SeedSubscription,
  type SeedSubscriptionType,
  type SeedUser,
} from './seed.js';
import { validateSeed } from './seed-validation.js';

/**
 * The four head shapes of the contract: variant A (2.1) and B (2.3), each with or without
 * head_metadata. The index doubles as the slot of the per-head JSON cache.
 */
export const HeadShape = { A: 0, A_EXT: 1, B: 2, B_EXT: 3 } as const;
export type HeadShape = (typeof HeadShape)[keyof typeof HeadShape];

/** A stored head with what the hot read paths precompute from it. */
export interface HeadEntry {
  readonly head: Readonly<SeedHead>;
  /** Lower-cased once so that search does not lower-case every name on every request. */
  readonly nameLower: string;
  readonly styleLower: string | undefined;
  /** Serialised projections by HeadShape; dropped whenever the head or its hair changes. */
  readonly json: (string | undefined)[];
}

export interface HeadFilter {
  /** Case-insensitive substring of the head name. */
  search?: string | undefined;
  /** Equals `style.label`, case-insensitively. An empty string filters nothing, like an absent one. */
  style?: string | undefined;
}

export interface HeadPatch {
  name?: string;
  output_format?: Record<string, unknown>;
  style?: Record<string, unknown>;
  version?: Record<string, unknown>;
  head_metadata?: Record<string, unknown>;
  hair_id?: string;
  hair_color?: string;
}

export interface SubscriptionPatch {
  platform_type?: PlatformTypeValue;
  expire_at?: string;
  active?: boolean;
  subscription_type_id?: string;
}

function newEntry(head: SeedHead): HeadEntry {
  return {
    head,
    nameLower: head.name.toLowerCase(),
    styleLower: labelOf(head.style)?.toLowerCase(),
    json: [undefined, undefined, undefined, undefined],
  };
}

function labelOf(value: LabelObject | undefined): string | undefined {
  const label = value?.label;
  return typeof label === 'string' ? label : undefined;
}

export class ReferenceStore {
  private readonly headsById = new Map<string, HeadEntry>();
  /** Listing order (created_at, then id); Get Heads and Get Heads Ext both page through it. */
  private ordered: HeadEntry[] = [];
  private readonly hairsById = new Map<string, SeedHair>();
  private readonly permissionList: SeedPermission[];
  private readonly permissionJson: string[];
  private readonly subscriptionTypesById = new Map<string, SeedSubscriptionType>();
  private readonly subscriptionsByOrganization = new Map<string, SeedSubscription>();
  private readonly usersByName = new Map<string, SeedUser>();
  private readonly tokens = new Map<string, SeedUser>();
  private lastStamp = 0;

  constructor(seed: ReferenceSeed = referenceSeed()) {
    validateSeed(seed);
    // A private deep copy: each server (and so each test file) mutates its own data.
    const data = structuredClone(seed);
    for (const hair of data.hairs) this.hairsById.set(hair.id, hair);
    for (const head of data.heads) this.headsById.set(head.id, newEntry(head));
    this.ordered = [...this.headsById.values()].sort(compareEntries);
    this.permissionList = data.permissions;
    this.permissionJson = data.permissions.map((p) => JSON.stringify({ role: p.role, id: p.id }));
    for (const type of data.subscriptionTypes) this.subscriptionTypesById.set(type.id, type);
    for (const subscription of data.subscriptions)
      this.subscriptionsByOrganization.set(subscription.organization_id, subscription);
    for (const user of data.users) this.usersByName.set(user.username, user);
  }

  // ---- heads ----

  get headCount(): number {
    return this.ordered.length;
  }

  /** Head ids in listing order. */
  headIds(): string[] {
    return this.ordered.map((e) => e.head.id);
  }

  findHead(id: string): HeadEntry | undefined {
    return this.headsById.get(id);
  }

  selectHeads(filter: HeadFilter = {}): readonly HeadEntry[] {
    const search = filter.search ? filter.search.toLowerCase() : undefined;
    const style = filter.style ? filter.style.toLowerCase() : undefined;
    if (search === undefined && style === undefined) return this.ordered;
    return this.ordered.filter(
      (e) => (search === undefined || e.nameLower.includes(search)) && (style === undefined || e.styleLower === style),
    );
  }

  project(entry: HeadEntry, shape: HeadShape): Record<string, unknown> {
    const head = entry.head;
    const hair = head.hair_id === undefined ? undefined : this.hairsById.get(head.hair_id);
    return headDto(
      head,
      hair,
      shape === HeadShape.A || shape === HeadShape.A_EXT,
      shape === HeadShape.A_EXT || shape === HeadShape.B_EXT,
    );
  }

  /** The projection as JSON text, serialised once per head and shape until the head changes. */
  headJson(entry: HeadEntry, shape: HeadShape): string {
    entry.json[shape] ??= JSON.stringify(this.project(entry, shape));
    return entry.json[shape];
  }

  /**
   * Applies the given fields only. Throws on an unknown hair or on a colour for a head without hair; the server checks
   * both first.
   */
  updateHead(id: string, patch: HeadPatch): HeadEntry | undefined {
    const entry = this.headsById.get(id);
    if (entry === undefined) return undefined;
    if (patch.hair_id !== undefined && !this.hairsById.has(patch.hair_id))
      throw new Error(`unknown hair ${patch.hair_id}`);
    const hairId = patch.hair_id ?? entry.head.hair_id;
    if (patch.hair_color !== undefined && hairId === undefined) throw new Error(`head ${id} has no hair to colour`);

    const stamp = this.stamp();
    const head: SeedHead = { ...entry.head, updated_at: stamp };
    if (patch.name !== undefined) head.name = patch.name;
    if (patch.output_format !== undefined) head.output_format = patch.output_format;
    if (patch.style !== undefined) head.style = patch.style;
    if (patch.version !== undefined) head.version = patch.version;
    if (patch.head_metadata !== undefined) head.head_metadata = patch.head_metadata;
    if (patch.hair_id !== undefined) head.hair_id = patch.hair_id;
    const updated = newEntry(head);
    this.headsById.set(id, updated);
    this.ordered[this.ordered.indexOf(entry)] = updated;

    if (patch.hair_color !== undefined && hairId !== undefined) {
      const hair = this.hairsById.get(hairId)!;
      hair.obj_metadata = { ...hair.obj_metadata, color: patch.hair_color };
      hair.updated_at = stamp;
      // Hair is shared by reference, so every head wearing it must re-serialise.
      for (const other of this.ordered) if (other.head.hair_id === hairId) other.json.fill(undefined);
    }
    return updated;
  }

  deleteHead(id: string): boolean {
    const entry = this.headsById.get(id);
    if (entry === undefined) return false;
    this.headsById.delete(id);
    this.ordered = this.ordered.filter((e) => e !== entry);
    return true;
  }

  // ---- hair ----

  hasHair(id: string): boolean {
    return this.hairsById.has(id);
  }

  getHair(id: string): Readonly<SeedHair> | undefined {
    return this.hairsById.get(id);
  }

  // ---- permissions ----

  get permissionCount(): number {
    return this.permissionList.length;
  }

  permissions(): readonly Readonly<SeedPermission>[] {
    return this.permissionList;
  }

  /** Items of one page as a JSON array text, from per-item JSON serialised at startup. */
  permissionsJson(offset: number, limit: number): string {
    return `[${this.permissionJson.slice(offset, offset + limit).join(',')}]`;
  }

  // ---- subscriptions ----

  hasSubscriptionType(id: string): boolean {
    return this.subscriptionTypesById.has(id);
  }

  subscriptionForOrganization(organizationId: string): Readonly<SeedSubscription> | undefined {
    return this.subscriptionsByOrganization.get(organizationId);
  }

  updateSubscription(organizationId: string, patch: SubscriptionPatch): Readonly<SeedSubscription> | undefined {
    const subscription = this.subscriptionsByOrganization.get(organizationId);
    if (subscription === undefined) return undefined;
    if (patch.subscription_type_id !== undefined && !this.subscriptionTypesById.has(patch.subscription_type_id)) {
      throw new Error(`unknown subscription type ${patch.subscription_type_id}`);
    }
    if (patch.platform_type !== undefined) subscription.platform_type = patch.platform_type;
    if (patch.expire_at !== undefined) subscription.expire_at = patch.expire_at;
    if (patch.active !== undefined) subscription.active = patch.active;
    if (patch.subscription_type_id !== undefined) subscription.subscription_type_id = patch.subscription_type_id;
    subscription.updated_at = this.stamp();
    return subscription;
  }

  subscriptionDto(subscription: Readonly<SeedSubscription>): Record<string, unknown> {
    return subscriptionDto(subscription, this.subscriptionTypesById.get(subscription.subscription_type_id)!);
  }

  // ---- users and tokens ----

  findUser(username: string): Readonly<SeedUser> | undefined {
    return this.usersByName.get(username);
  }

  /** Issues a fresh random token per successful login; several can be valid for one user. */
  login(username: string, password: string): string | undefined {
    const user = this.usersByName.get(username);
    if (user === undefined || user.password !== password) return undefined;
    const token = randomBytes(32).toString('base64url');
    this.tokens.set(token, user);
    return token;
  }

  userForToken(token: string): Readonly<SeedUser> | undefined {
    return this.tokens.get(token);
  }

  /** A strictly increasing timestamp, so two updates in the same millisecond still order. */
  private stamp(): string {
    this.lastStamp = Math.max(Date.now(), this.lastStamp + 1);
    return new Date(this.lastStamp).toISOString();
  }
}

function compareEntries(a: HeadEntry, b: HeadEntry): number {
  if (a.head.created_at !== b.head.created_at) return a.head.created_at < b.head.created_at ? -1 : 1;
  return a.head.id < b.head.id ? -1 : a.head.id > b.head.id ? 1 : 0;
}
