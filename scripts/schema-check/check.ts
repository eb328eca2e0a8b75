import { buildSchema } from 'graphql';
import { type SchemaChange, schemaChanges } from './changes.js';
import { entityKeyChanges } from './entity-keys.js';
import { type JudgedOperation, judgeOperations, type KnownOperation } from './operations.js';
import { memberCoordinates } from './schema-coordinates.js';
import { type Usage, usesOf } from './usage.js';

/*
 * The schema check (issue 43), a pure function of its inputs: two schemas' SDL, the operations
 * clients use, optionally the fleet's usage, and the coordinates CHANGELOG.md acknowledges. It
 * says what changed, what each breaking or dangerous change does to those operations and how
 * much the fleet uses what it touches, the deprecated coordinates and their uses, and what fails
 * the check (scripts/schema-check.ts turns that into the exit code).
 */

export interface CheckInput {
  readonly base: string;
  readonly next: string;
  readonly operations: readonly KnownOperation[];
  /** The fleet's uses, when `--usage` was given. */
  readonly usage?: Usage | undefined;
  /** Coordinates CHANGELOG.md's `## [Unreleased]` names (changelog.ts). */
  readonly acknowledged: ReadonlySet<string>;
  /**
   * `--strict`: a breaking change fails unless acknowledged, even when it breaks no known operation and has no uses.
   */
  readonly strict: boolean;
  /** schema.subgraph.graphql at the base and now, where both have it: its entities' keys are checked too. */
  readonly subgraph?: { readonly base: string; readonly next: string } | undefined;
}

export type Uses = ReturnType<typeof usesOf>;

export interface CheckedChange extends SchemaChange {
  /** Operations a breaking change breaks: those selecting what it reaches. */
  readonly breaks: readonly KnownOperation[];
  /** Operations a dangerous change may change the answers of (they select what it reaches, and still validate). */
  readonly touches: readonly KnownOperation[];
  /** Operations it leaves alone. */
  readonly leavesAlone: readonly KnownOperation[];
  /** The fleet's uses of what it reaches, when usage was given. */
  readonly uses: Uses | undefined;
  readonly acknowledged: boolean;
}

/** A coordinate the new schema marks `@deprecated`: the way to its removal. */
export interface Deprecation {
  readonly coordinate: string;
  readonly reason: string;
  readonly selectedBy: readonly KnownOperation[];
  readonly uses: Uses | undefined;
}

export interface CheckReport {
  readonly changes: readonly CheckedChange[];
  readonly deprecations: readonly Deprecation[];
  readonly operations: readonly JudgedOperation[];
  /** Operations valid against the base and not against the new schema. */
  readonly noLongerValid: readonly JudgedOperation[];
  /** Operations already invalid against the base: not the change's doing, judged no further. */
  readonly alreadyInvalid: readonly JudgedOperation[];
  /** What the usage covers (`in 7 days`), when given. */
  readonly usagePeriod: string | undefined;
  /** Why the check fails, one line each; none: it passes. */
  readonly failures: readonly string[];
}

const selectsAny = (judged: JudgedOperation, coordinates: readonly string[]) =>
  coordinates.some((coordinate) => judged.selects.has(coordinate));
const count = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/**
 * What one breaking or dangerous change does to the operations (valid against the base) and how much the fleet uses
 * what it reaches.
 */
function checkChange(change: SchemaChange, judged: readonly JudgedOperation[], input: CheckInput): CheckedChange {
  const judgedHere = change.class === 'safe' ? [] : judged;
  const touched = judgedHere.filter((operation) => selectsAny(operation, change.reaches));
  // A dangerous change breaks nothing by itself: what it touches still validates, its answers may differ (a value it
  // did not know).
  const breaks = change.class === 'breaking' ? touched : [];
  return {
    ...change,
    breaks: breaks.map((operation) => operation.operation),
    touches: touched.filter((operation) => !breaks.includes(operation)).map((operation) => operation.operation),
    leavesAlone: judgedHere.filter((operation) => !touched.includes(operation)).map((operation) => operation.operation),
    uses: input.usage === undefined || change.class === 'safe' ? undefined : usesOf(input.usage, change.reaches),
    acknowledged: input.acknowledged.has(change.coordinate),
  };
}

/**
 * Why a breaking change fails the check: it breaks known operations, the fleet uses it, or (--strict) it is not
 * acknowledged.
 */
function failuresOf(change: CheckedChange, input: CheckInput, period: string | undefined): string[] {
  if (change.class !== 'breaking') return [];
  const failures: string[] = [];
  const named = `\`${change.coordinate}\``;
  if (change.breaks.length > 0)
    failures.push(
      `${named} breaks ${count(change.breaks.length, 'known operation')}: change them (or retire them from their manifest) first`,
    );
  if (change.uses !== undefined && change.uses.uses > 0)
    failures.push(
      `${named} has ${count(change.uses.uses, 'use')} ${period}: deprecate it and wait for its uses to fall to zero first`,
    );
  if (input.strict && !change.acknowledged && failures.length === 0)
    failures.push(
      `${named} is a breaking change: acknowledge it with a line naming ${named} under "## [Unreleased]" in CHANGELOG.md`,
    );
  return failures;
}

/**
 * The check: the changes from `base` to `next`, each against the operations and the usage, the deprecations, and what
 * fails.
 */
export async function checkSchema(input: CheckInput): Promise<CheckReport> {
  const base = buildSchema(input.base);
  const next = buildSchema(input.next);
  const operations = judgeOperations(input.operations, base, next);
  const alreadyInvalid = operations.filter((operation) => operation.invalidBefore.length > 0);
  const judged = operations.filter((operation) => operation.invalidBefore.length === 0);
  const keyChanges = input.subgraph === undefined ? [] : entityKeyChanges(input.subgraph.base, input.subgraph.next);
  const changes = [...(await schemaChanges(base, next)), ...keyChanges].map((change) =>
    checkChange(change, judged, input),
  );
  const broken = new Set(changes.flatMap((change) => change.breaks));
  // An operation the new schema refuses that no change was found to reach: broken all the same.
  const noLongerValid = judged.filter((operation) => operation.invalidAfter.length > 0);
  const period = input.usage?.period;
  const failures = [
    ...changes.flatMap((change) => failuresOf(change, input, period)),
    // The subgraphs that reference an entity by a key are not known here: a key removed fails unless acknowledged.
    ...changes
      .filter((change) => change.type === 'ENTITY_KEY_REMOVED' && !change.acknowledged && !input.strict)
      .map(
        (change) =>
          `\`${change.coordinate}\`: ${change.message} breaks the subgraphs that reference it by that key: acknowledge it with a line naming \`${change.coordinate}\` under "## [Unreleased]" in CHANGELOG.md`,
      ),
    ...noLongerValid
      .filter((operation) => !broken.has(operation.operation))
      .map(
        ({ operation, invalidAfter }) =>
          `${operation.name} (${operation.file}) no longer validates: ${invalidAfter[0]}`,
      ),
  ];
  const deprecations = memberCoordinates(next)
    .filter((member) => member.deprecationReason !== undefined)
    .map(({ coordinate, deprecationReason }) => ({
      coordinate,
      reason: deprecationReason!,
      selectedBy: judged
        .filter((operation) => operation.selects.has(coordinate))
        .map((operation) => operation.operation),
      uses: input.usage === undefined ? undefined : usesOf(input.usage, [coordinate]),
    }));
  return { changes, deprecations, operations, noLongerValid, alreadyInvalid, usagePeriod: period, failures };
}
