import { execFileSync } from 'node:child_process';
import { lastRelease } from './changelog.js';

/*
 * Which commit's schema.graphql the check compares with, when none is given. CI runs on a clean,
 * full clone of main itself, where "the merge base with main" is HEAD: there the base is the last
 * release instead (its tag `v<version>`, else the commit whose CHANGELOG.md first named it), or,
 * before any release, the commit that started CHANGELOG.md. So every breaking change since the
 * schema clients were last given must be acknowledged under `## [Unreleased]`, however many
 * commits a push holds. On a branch, the merge base with main is the base: the branch's own changes.
 */

/** Runs git with `args`; its output trimmed, or undefined when git fails. */
export type Git = (args: readonly string[]) => string | undefined;

export function gitIn(cwd: string): Git {
  return (args) => {
    try {
      return execFileSync('git', args, {
        cwd,
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim();
    } catch {
      return undefined;
    }
  };
}

export interface BaseChoice {
  readonly ref: string;
  /** Why this one, as the report says it. */
  readonly why: string;
}

const commitOf = (git: Git, ref: string) => git(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`]) || undefined;

/** The oldest commit of `git log args` (the one that introduced what it searches). */
const oldest = (git: Git, args: readonly string[]) =>
  git(['log', '--format=%H', ...args])
    ?.split('\n')
    .filter(Boolean)
    .at(-1);

/**
 * The base: `given` (--base, or SCHEMA_CHECK_BASE), else the merge base with origin/main (or main)
 * when HEAD is not on it, else the last release, else the commit that started CHANGELOG.md, else
 * the previous commit; undefined in a repository of one commit.
 */
export function chooseBase(
  git: Git,
  changelog: string | undefined,
  given: BaseChoice | undefined,
): BaseChoice | undefined {
  if (given !== undefined) return given;
  const head = commitOf(git, 'HEAD');
  for (const main of ['origin/main', 'main']) {
    if (commitOf(git, main) === undefined) continue;
    const mergeBase = git(['merge-base', 'HEAD', main]);
    if (mergeBase !== undefined && mergeBase !== head) return { ref: mergeBase, why: `the merge base with ${main}` };
    break;
  }
  const release = changelog === undefined ? undefined : lastRelease(changelog);
  if (release !== undefined) {
    for (const tag of [`v${release}`, release])
      if (commitOf(git, tag) !== undefined) return { ref: tag, why: `the release ${release} (tag ${tag})` };
    const released = oldest(git, ['-S', `[${release}]`, '--', 'CHANGELOG.md']);
    if (released !== undefined)
      return { ref: released, why: `the release ${release} (the commit that named it in CHANGELOG.md)` };
  }
  const started = oldest(git, ['--diff-filter=A', '--', 'CHANGELOG.md']);
  if (started !== undefined) return { ref: started, why: 'the commit that started CHANGELOG.md (no release yet)' };
  if (commitOf(git, 'HEAD~1') !== undefined) return { ref: 'HEAD~1', why: 'the previous commit' };
  return undefined;
}

/**
 * schema.graphql (or `path`) as `ref` has it; undefined when `ref` has no such file; throws when `ref` is not a commit
 * here.
 */
export function schemaAt(git: Git, ref: string, path = 'schema.graphql'): string | undefined {
  if (commitOf(git, ref) === undefined) {
    throw new Error(
      `${ref} is not a commit of this repository (a shallow clone? fetch its history, or name another base with --base or SCHEMA_CHECK_BASE)`,
    );
  }
  return git(['show', `${ref}:${path}`]);
}

/** A commit as the report names it: its short hash, after the ref when the ref is a name. */
export function describeRef(git: Git, ref: string): string {
  const short = git(['rev-parse', '--short', ref]) ?? ref;
  return short === ref || ref.startsWith(short) ? short : `${ref} (${short})`;
}
