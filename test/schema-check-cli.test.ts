import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { chooseBase, gitIn } from '../scripts/schema-check/base.js';
import { runSchemaCheck } from '../scripts/schema-check/cli.js';

/*
 * `npm run schema:check` on git repositories made here (each a clean clone's shape: full
 * history): which base it picks on main and on a branch, the base's schema.graphql read from git,
 * CHANGELOG.md's acknowledgements, --strict and the exit codes. The check itself is
 * test/schema-check.test.ts.
 */

const fixtures = fileURLToPath(new URL('./fixtures/schema-check/', import.meta.url));
const baseSchema = readFileSync(`${fixtures}base.graphql`, 'utf8');
/** The base without Head.rig's argument: a breaking change no operation of the manifest uses. */
const unusedRemoval = baseSchema.replace('rig(format: String): String', 'rig: String');
const manifest = readFileSync(`${fixtures}manifest.json`, 'utf8');
const changelog = (unreleased: string, released = '') =>
  `# Changelog\n\nAll notable changes.\n\n## [Unreleased]\n${unreleased}\n${released}`;

let repos: string[] = [];
afterEach(() => {
  for (const repo of repos) rmSync(repo, { recursive: true, force: true });
  repos = [];
});

/** A repository on `main` with one commit per entry of `commits` (files to write), as a clean clone has them. */
function repository(...commits: Record<string, string>[]): { dir: string; git: (...args: string[]) => string } {
  const dir = mkdtempSync(join(tmpdir(), 'schema-check-'));
  repos.push(dir);
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: 't',
    GIT_AUTHOR_EMAIL: 't@example.com',
    GIT_COMMITTER_NAME: 't',
    GIT_COMMITTER_EMAIL: 't@example.com',
  };
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, env, encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  for (const [i, files] of commits.entries()) commit(dir, git, files, `commit ${i}`);
  return { dir, git };
}

function commit(
  dir: string,
  git: (...args: string[]) => string,
  files: Record<string, string>,
  message: string,
): string {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  git('add', '-A');
  git('commit', '-q', '-m', message);
  return git('rev-parse', 'HEAD');
}

const check = (dir: string, args: string[] = [], env: Record<string, string> = {}) =>
  runSchemaCheck(args, { cwd: dir, env });

describe('the base it compares with', () => {
  it('on main with no release: the commit that started CHANGELOG.md, so every breaking change since must be acknowledged', () => {
    const { dir, git } = repository(
      { 'schema.graphql': 'type Query { a: Int }' },
      { 'schema.graphql': baseSchema, 'CHANGELOG.md': changelog('') },
      { 'schema.graphql': unusedRemoval },
      { 'README.md': 'x' },
    );
    const started = git('rev-parse', 'HEAD~2');
    expect(chooseBase(gitIn(dir), changelog(''), undefined)).toEqual({
      ref: started,
      why: 'the commit that started CHANGELOG.md (no release yet)',
    });
  });

  it('on main after a release: the commit that named it in CHANGELOG.md, or its tag', () => {
    const released = changelog('', '## [0.2.0] - 2025-06-01\n- First.\n');
    const { dir, git } = repository(
      { 'schema.graphql': baseSchema, 'CHANGELOG.md': changelog('') },
      { 'CHANGELOG.md': released },
      { 'schema.graphql': unusedRemoval },
    );
    const release = git('rev-parse', 'HEAD~1');
    expect(chooseBase(gitIn(dir), released, undefined)).toEqual({
      ref: release,
      why: 'the release 0.2.0 (the commit that named it in CHANGELOG.md)',
    });
    git('tag', 'v0.2.0', 'HEAD~2');
    expect(chooseBase(gitIn(dir), released, undefined)).toEqual({
      ref: 'v0.2.0',
      why: 'the release 0.2.0 (tag v0.2.0)',
    });
  });

  it('on a branch: the merge base with main; given: --base, else SCHEMA_CHECK_BASE; with no changelog: the previous commit', async () => {
    const { dir, git } = repository({ 'schema.graphql': baseSchema }, { 'README.md': 'one' });
    expect(chooseBase(gitIn(dir), undefined, undefined)).toEqual({ ref: 'HEAD~1', why: 'the previous commit' });
    const forked = git('rev-parse', 'HEAD');
    git('checkout', '-q', '-b', 'feature');
    commit(dir, git, { 'schema.graphql': unusedRemoval }, 'on the branch');
    commit(dir, git, { 'README.md': 'two' }, 'more');
    expect(chooseBase(gitIn(dir), undefined, undefined)).toEqual({ ref: forked, why: 'the merge base with main' });
    expect((await check(dir)).stdout).toContain(`base: the merge base with main`);
    expect((await check(dir, [], { SCHEMA_CHECK_BASE: 'HEAD' })).stdout).toContain(
      'base: given with SCHEMA_CHECK_BASE',
    );
    expect((await check(dir, ['--base', 'HEAD~1'], { SCHEMA_CHECK_BASE: 'HEAD' })).stdout).toMatch(
      /base: given with --base[\s\S]*No changes to the schema\./,
    );
  });
});

describe('npm run schema:check on a repository', () => {
  it('--strict fails an unacknowledged breaking change that breaks no known operation; a line under Unreleased naming it lets it pass', async () => {
    const { dir, git } = repository({
      'schema.graphql': baseSchema,
      'CHANGELOG.md': changelog(''),
      'src/generated/persisted-documents.json': manifest,
    });
    commit(dir, git, { 'schema.graphql': unusedRemoval }, 'the argument goes');
    const plain = await check(dir);
    expect(plain.exitCode).toBe(0);
    expect(plain.stdout).toMatch(/operations: 5 \(src\/generated\/persisted-documents\.json: 5\)/);
    expect(plain.stdout).toMatch(
      /^breaking `Head\.rig\(format:\)`: .*\n {2}breaks no known operation; leaves all 5 alone\n {2}not acknowledged in CHANGELOG\.md$/m,
    );
    const strict = await check(dir, ['--strict']);
    expect(strict.exitCode).toBe(1);
    expect(strict.stdout).toContain(
      'FAILED: 1 reason\n  - `Head.rig(format:)` is a breaking change: acknowledge it with a line naming `Head.rig(format:)` under "## [Unreleased]" in CHANGELOG.md',
    );
    commit(
      dir,
      git,
      { 'CHANGELOG.md': changelog('### Removed\n- `Head.rig(format:)`: no client passes it.\n') },
      'acknowledged',
    );
    const acknowledged = await check(dir, ['--strict']);
    expect(acknowledged.exitCode).toBe(0);
    expect(acknowledged.stdout).toContain('acknowledged in CHANGELOG.md (Unreleased)');
  });

  it('fails a change that breaks an operation of --documents, with its name and file, acknowledged or not; --head reads a commit', async () => {
    const removed = baseSchema.replace('  arUrl: String\n', '');
    const { dir, git } = repository({
      'schema.graphql': baseSchema,
      'CHANGELOG.md': changelog(''),
      'app/Card.graphql': 'query Card { head(id: "1") { arUrl } }',
    });
    commit(dir, git, { 'schema.graphql': removed, 'CHANGELOG.md': changelog('- Removed `Head.arUrl`.') }, 'arUrl goes');
    const result = await check(dir, ['--documents', 'app', '--head', 'HEAD']);
    expect(result.exitCode).toBe(1);
    expect(result.stdout).toMatch(/^ {2}breaks 1 operation: Card \(app\/Card\.graphql\)$/m);
    expect(result.stdout).toContain('acknowledged in CHANGELOG.md (Unreleased)');
    expect(result.stdout).toContain('- `Head.arUrl` breaks 1 known operation');
  });

  it('with --usage, fails the removal of a field the fleet used in the period', async () => {
    const { dir, git } = repository({ 'schema.graphql': baseSchema, 'CHANGELOG.md': changelog('') });
    commit(
      dir,
      git,
      {
        'schema.graphql': baseSchema.replace(/ {2}legacyCount: Int @deprecated\(reason: "Count the heads\."\)\n/, ''),
        'CHANGELOG.md': changelog('- `Query.legacyCount`'),
      },
      'goes',
    );
    writeFileSync(join(dir, 'usage.json'), readFileSync(`${fixtures}usage.json`));
    const result = await check(dir, ['--usage', 'usage.json', '--period', '7d']);
    expect(result.exitCode).toBe(1);
    expect(result.stdout).toContain('usage: usage.json (in 7 days)');
    expect(result.stdout).toContain('`Query.legacyCount`: 3 uses by `android 1.0` in 7 days');
  });

  it('says why it cannot run (exit 2): a base that is not a commit, a bad option', async () => {
    const { dir } = repository({ 'schema.graphql': baseSchema }, { 'README.md': 'x' });
    const unknown = await check(dir, ['--base', 'no-such-ref']);
    expect(unknown).toMatchObject({
      exitCode: 2,
      stderr: expect.stringContaining('no-such-ref is not a commit of this repository'),
    });
    expect(await check(dir, ['--period', 'a week'])).toMatchObject({
      exitCode: 2,
      stderr: expect.stringContaining('--period: expected a Prometheus duration'),
    });
    expect(await check(dir, ['--nope'])).toMatchObject({ exitCode: 2 });
    // A base from before schema.graphql existed: nothing to compare, not a failure.
    const { dir: young } = repository({ 'README.md': 'x' }, { 'schema.graphql': baseSchema });
    expect(await check(young)).toMatchObject({
      exitCode: 0,
      stdout: expect.stringContaining('has no schema.graphql: nothing to compare'),
    });
  });

  it("runs as the npm script does (tsx scripts/schema-check.ts), its exit code the check's", () => {
    const { dir, git } = repository({ 'schema.graphql': baseSchema, 'CHANGELOG.md': changelog('') });
    commit(dir, git, { 'schema.graphql': unusedRemoval }, 'the argument goes');
    const project = fileURLToPath(new URL('..', import.meta.url));
    const run = spawnSync(
      process.execPath,
      [join(project, 'node_modules/tsx/dist/cli.mjs'), join(project, 'scripts/schema-check.ts'), '--strict'],
      { cwd: dir, encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(
      /^breaking +Head\.rig\(format:\) +Argument 'format: String' was removed from field 'Head\.rig'$/m,
    );
  });
});
