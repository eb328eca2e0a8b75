import type { ClientMetricsBounds } from '../../config.js';

/** Longer names and versions are cut to this. */
const MAX_LENGTH = 64;
/** Letters, digits, space and `_ . : / @ + ( ) -` (`1.2.3-rc.1+build`, `@acme/web`, `iOS (14)`). */
const plain = /^[\w .:/@+()-]+$/;

/** The labels of a name or version absent, refused by the check, or past the bounds. */
const ABSENT = 'unknown';
const REFUSED = 'invalid';
const OTHER = 'other';

/** A request's client: what the span carries (undefined: absent or refused) and its bounded metric labels. */
export interface ClientIdentity {
  readonly name: string | undefined;
  readonly version: string | undefined;
  readonly nameLabel: string;
  readonly versionLabel: string;
}

/** A client that names itself not at all: most requests, so made once. */
export const anonymous: ClientIdentity = Object.freeze({
  name: undefined,
  version: undefined,
  nameLabel: ABSENT,
  versionLabel: ABSENT,
});

/** A value cut to MAX_LENGTH, or undefined when its characters fail the check. */
function checked(value: string): string | undefined {
  const capped = value.slice(0, MAX_LENGTH);
  return plain.test(capped) ? capped : undefined;
}

const labelOf = (value: string | null, kept: string | undefined) =>
  value === null || value === '' ? ABSENT : (kept ?? REFUSED);

/**
 * Which client app sent a request, as it names itself: Apollo's `apollographql-client-name`/`-version` (what Apollo
 * Client's `clientAwareness` sends), else `graphql-client-name`/`-version` (Hive's and others'). The values come from
 * clients, so they are checked before they reach a label or a span, and bounded: the names an operator lists
 * (`knownNames`) always get a label; of the others, the first `maxNames` seen; under each name label (`unknown`,
 * `invalid`, `other` too) the first `maxVersions` versions: at most (known + maxNames + 3) × (maxVersions + 3) pairs.
 */
export class ClientAwareness {
  /** Each name label, with the version labels it keeps. */
  readonly #names = new Map<string, Set<string>>();
  #keptNames = 0;

  constructor(private readonly bounds: ClientMetricsBounds) {}

  identify(headers: Pick<Headers, 'get'>): ClientIdentity {
    const apollo = headers.get('apollographql-client-name');
    const name = apollo ?? headers.get('graphql-client-name');
    if (name === null) return anonymous;
    const version = headers.get(apollo === null ? 'graphql-client-version' : 'apollographql-client-version');
    const keptName = checked(name);
    const keptVersion = version === null ? undefined : checked(version);
    const nameLabel = this.#nameLabel(labelOf(name, keptName), keptName !== undefined);
    return {
      name: keptName,
      version: keptVersion,
      nameLabel,
      versionLabel: this.#versionLabel(nameLabel, labelOf(version, keptVersion), keptVersion !== undefined),
    };
  }

  #nameLabel(sentLabel: string, sent: boolean): string {
    if (this.#names.has(sentLabel)) return sentLabel;
    let label = sentLabel;
    if (sent && !this.bounds.knownNames.has(label)) {
      if (this.#keptNames >= this.bounds.maxNames) label = OTHER;
      else this.#keptNames++;
    }
    if (!this.#names.has(label)) this.#names.set(label, new Set());
    return label;
  }

  #versionLabel(name: string, label: string, sent: boolean): string {
    const versions = this.#names.get(name)!;
    if (!sent || versions.has(label)) return label;
    if (versions.size >= this.bounds.maxVersions) return OTHER;
    versions.add(label);
    return label;
  }
}
