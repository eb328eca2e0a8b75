import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * Comments and documents name the files they mean (`documents/prepared.ts`): once a file is
 * moved or gone, its name in a comment or a document misleads whoever follows it.
 * Every `.ts` file named in a comment of the repository's code, or anywhere in its documents,
 * exists, by its path (as far as the name gives one) or by its name alone.
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const skipped = new Set(['node_modules', 'dist', 'results', 'generated', '.git']);

function filesUnder(dir: string, into: string[] = []): string[] {
  for (const entry of readdirSync(join(root, dir))) {
    if (skipped.has(entry)) continue;
    const path = dir === '' ? entry : `${dir}/${entry}`;
    if (statSync(join(root, path)).isDirectory()) filesUnder(path, into);
    else into.push(path);
  }
  return into;
}

const files = filesUnder('');
const names = new Set(files.map((file) => basename(file)));

/** The comments of a TypeScript or JavaScript file (`//` and `/* … *\/`), where a file's name is prose, not data. */
const commentsOf = (text: string): string =>
  [...text.matchAll(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g)].map((match) => match[0]).join('\n');

/**
 * A `.ts` file's name or path in prose (not a glob such as `*.test.ts`, not a package's file such as `@scope/x.ts`).
 */
const named = /(?<![\w@.*/-])(?:\.\/)?((?:[\w-]+\/)*[\w.-]+\.ts)\b/g;

/** Whether a name points at a file here: its path's end matches one, or it is a bare name some file has. */
function exists(reference: string): boolean {
  if (!names.has(basename(reference))) return false;
  return !reference.includes('/') || files.some((file) => file === reference || file.endsWith(`/${reference}`));
}

describe('file names in comments and documents', () => {
  it('name files that exist', () => {
    const stale: string[] = [];
    for (const file of files) {
      const prose = /\.(md)$/.test(file)
        ? readFileSync(join(root, file), 'utf8')
        : /\.(ts|mts|cjs|mjs)$/.test(file)
          ? commentsOf(readFileSync(join(root, file), 'utf8'))
          : undefined;
      if (prose === undefined) continue;
      for (const [, reference] of prose.matchAll(named))
        if (!reference!.endsWith('.d.ts') && !exists(reference!)) stale.push(`${file}: ${reference}`);
    }
    expect([...new Set(stale)].sort()).toEqual([]);
  });

  it('would see a stale name', () => {
    expect(exists('server/pipeline/stages.ts')).toBe(true);
    expect(exists('stages.ts')).toBe(true);
    expect(exists('server/lane.ts')).toBe(false);
    expect(
      [...'see documents/prepared.ts, server/lane.ts and `*.test.ts`'.matchAll(named)].map((match) => match[1]),
    ).toEqual(['documents/prepared.ts', 'server/lane.ts']);
  });
});
