import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * Comments and documents name the files, functions and settings they mean: once one is renamed or
 * gone, its name in a comment or a document misleads whoever follows it. Here every file named in a
 * comment of the repository's code or in its documents exists (by its path, as far as the name
 * gives one, or by its name alone); every setting, code or other name in capitals joined by
 * underscores named there, and every function or option (a name in camel case between backticks) a
 * document or comment names, appears in the code (comments aside); and docs/architecture.md's
 * source tree lists the files of src/ as they are. Names that are someone else's (a library's, the
 * kernel's, a client project's) are listed below, each with whose it is. CHANGELOG.md is history:
 * it names what was, and is left out.
 */

const root = fileURLToPath(new URL('..', import.meta.url));

/** The repository's files: those git tracks and new ones it does not ignore. */
const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '');
const names = new Set(files.map((file) => basename(file)));
const read = (file: string) => readFileSync(join(root, file), 'utf8');

const isCode = (file: string) => /\.(ts|mts|cjs|mjs|js)$/.test(file) && !file.startsWith('src/generated/');
const isDocument = (file: string) => file.endsWith('.md') && file !== 'CHANGELOG.md';

const comment = /\/\/[^\n]*|\/\*[\s\S]*?\*\//g;
/**
 * The comments of a TypeScript or JavaScript file (`//` and `/* … *\/`), where a name is prose, not
 * data.
 */
const commentsOf = (text: string): string => [...text.matchAll(comment)].map((match) => match[0]).join('\n');

/** The prose of each file that has some: a document whole, the comments of code. */
const prose: [file: string, text: string][] = files.flatMap((file): [string, string][] =>
  isDocument(file) ? [[file, read(file)]] : isCode(file) ? [[file, commentsOf(read(file))]] : [],
);

/**
 * What the code says, comments aside, and the configuration files beside it (this file's own
 * examples aside).
 */
const codeText = files
  .filter((file) => isCode(file) || /\.(json|ya?ml|cfg|sh)$/.test(file) || file.startsWith('.ci/'))
  .filter((file) => file !== 'test/file-references.test.ts')
  .map((file) => (isCode(file) ? read(file).replace(comment, '') : read(file)))
  .join('\n');

/** Names of others that the documents and comments name: whose each is. */
const othersNames: Record<string, string> = {
  // Files
  'sentinel.conf': "Redis Sentinel's configuration",
  'persisted_queries.json': "Apollo iOS's manifest, in a client's project",
  'relay.config.json': "Relay's configuration, in a client's project",
  'usage-30d.json': 'an example of a saved usage file',
  'body.json': 'an example file name',
  'clients/ios/HeadCard.graphql': "an example path in a client's repository",
  'run.mjs': "the peer bench's (../shared/peer-bench)",
  'response.body.json': "code in a comment (a Response's body read as JSON), not a file",
  // Constants
  MALLOC_ARENA_MAX: "glibc's",
  OTEL_EXPORTER_OTLP_HEADERS: "OpenTelemetry's SDK",
  MODULE_NOT_FOUND: "Node's error code",
  RLIMIT_NOFILE: "the kernel's limit",
  // Functions and options
  maxRequestBodySize: "yoga's option",
  processRegularResult: "yoga's function",
  persistConfig: "Apollo iOS's codegen option",
  persistedExchange: "urql's exchange (@urql/exchange-persisted)",
  formatError: "GraphiQL's option",
  insuranceLimiter: "rate-limiter-flexible's option",
  rlflxIncr: "rate-limiter-flexible's Lua function",
  onParse: "envelop's hook",
  iOS: 'a platform',
};

/**
 * A file's name or path in prose (not a glob such as `*.test.ts`, not a package's file such as
 * `@scope/x.ts`, not a build's output under `dist/`).
 */
const fileName = /(?<![\w@.*/-])(?:\.\/)?((?:[\w-]+\/)*[\w.-]+\.(?:ts|mts|cjs|mjs|md|graphql|ya?ml|cfg|json))\b/g;

/**
 * Whether a file name points at a file here: its path's end matches one, or it is a bare name some
 * file has.
 */
function exists(reference: string): boolean {
  if (reference.startsWith('dist/') || reference.includes('/dist/') || reference in othersNames) return true;
  if (!names.has(basename(reference))) return false;
  return !reference.includes('/') || files.some((file) => file === reference || file.endsWith(`/${reference}`));
}

/** A name in capitals joined by underscores: a setting, an error code, an environment variable. */
const constant = /\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b/g;
/** A name in camel case (between backticks, below): a function, an option, a field. */
const backticked = /`([^`\n]+)`/g;
const camel = /(?<![\w.$/-])[a-z][a-zA-Z0-9]*[A-Z][a-zA-Z0-9]*\b/g;

const inCode = new Map<string, boolean>();
const appears = (name: string): boolean => {
  let known = inCode.get(name);
  if (known === undefined) {
    known = name in othersNames || new RegExp(`\\b${name}\\b`).test(codeText);
    inCode.set(name, known);
  }
  return known;
};

describe('names in comments and documents', () => {
  it('name files that exist', () => {
    const stale = prose.flatMap(([file, text]) =>
      [...text.matchAll(fileName)]
        .map((match) => match[1]!)
        .filter((reference) => !reference.endsWith('.d.ts') && !exists(reference))
        .map((reference) => `${file}: ${reference}`),
    );
    expect([...new Set(stale)].sort()).toEqual([]);
  });

  it('name settings, codes, functions and options the code has', () => {
    const stale = new Set<string>();
    for (const [file, text] of prose) {
      for (const [name] of text.matchAll(constant)) if (!appears(name)) stale.add(`${file}: ${name}`);
      for (const [, quoted] of text.matchAll(backticked))
        for (const [name] of quoted!.matchAll(camel)) if (!appears(name)) stale.add(`${file}: ${name}`);
    }
    expect([...stale].sort()).toEqual([]);
  });

  it('would see a stale name', () => {
    expect(exists('server/pipeline/stages.ts')).toBe(true);
    expect(exists('stages.ts')).toBe(true);
    expect(exists('server/lane.ts')).toBe(false);
    expect(
      [...'see documents/prepared.ts, server/lane.ts, docs/deploy.md and `*.test.ts`'.matchAll(fileName)].map(
        (match) => match[1],
      ),
    ).toEqual(['documents/prepared.ts', 'server/lane.ts', 'docs/deploy.md']);
    expect(appears('UPSTREAM_URL')).toBe(true);
    expect(appears('UPSTREAM_LANE_MS')).toBe(false);
    expect(appears('gatewayPolicies')).toBe(true);
    expect(appears('boundedStringify')).toBe(false);
  });
});

/**
 * docs/architecture.md's source tree: each folder of src/ with the `.ts` files it holds named in
 * its entry. generated/ and reference-upstream/ are summed up there (the paragraph under the tree
 * names reference-upstream's files, which the test above checks).
 */
function sourceTree(): Map<string, Set<string>> {
  const text = read('docs/architecture.md');
  const block = /## Source tree\n\n```\n([\s\S]*?)```/.exec(text)?.[1];
  if (block === undefined) throw new Error('docs/architecture.md has no source tree');
  const tree = new Map<string, Set<string>>();
  const path: string[] = [];
  let current = '';
  for (const line of block.split('\n')) {
    const entry = /^( *)(\S+\/)( |$)/.exec(line);
    if (entry !== undefined && entry !== null) {
      const depth = entry[1]!.length / 2;
      path.length = depth;
      path.push(entry[2]!.slice(0, -1));
      current = path.join('/');
      tree.set(current, tree.get(current) ?? new Set());
    }
    for (const [, name] of line.matchAll(/([\w.-]+\.ts)\b/g)) {
      // A line of the top folder's files (`main.ts, config.ts`) begins at its children's depth.
      const folder = /^ {2}[\w.-]+\.ts/.test(line) ? 'src' : current;
      if (!tree.has(folder)) tree.set(folder, new Set());
      tree.get(folder)!.add(name!);
    }
  }
  return tree;
}

describe("docs/architecture.md's source tree", () => {
  it('names every file of every folder of src/, and no other', () => {
    const tree = sourceTree();
    const summed = ['src/generated', 'src/reference-upstream'];
    const folders = new Map<string, Set<string>>();
    for (const file of files.filter((f) => f.startsWith('src/') && f.endsWith('.ts'))) {
      const folder = file.slice(0, file.lastIndexOf('/'));
      if (summed.some((s) => folder === s || folder.startsWith(`${s}/`))) continue;
      if (!folders.has(folder)) folders.set(folder, new Set());
      folders.get(folder)!.add(basename(file));
    }
    const listed = new Map([...tree].filter(([folder]) => !summed.includes(folder)));
    const sorted = (map: Map<string, Set<string>>) =>
      Object.fromEntries([...map].map(([folder, set]) => [folder, [...set].sort()] as const).sort());
    expect(sorted(listed)).toEqual(sorted(folders));
  });
});
