import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * Biome lays code out at a width of 120 (biome.jsonc) but leaves comments as they are written:
 * every line of a comment in the repository's code is held to the same width here. (Strings are
 * left alone: a message or a description is one string however long.)
 */

const WIDTH = 120;
const root = fileURLToPath(new URL('..', import.meta.url));

/** The code files git tracks, generated ones aside. */
const files = execFileSync('git', ['ls-files', '*.ts', '*.mts', '*.js', '*.mjs', '*.cjs'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\n')
  .filter((file) => file !== '' && !file.startsWith('src/generated/'));

/** A line that is all comment: `//`, a block's `*` line, or a block's opening. */
const commentLine = /^\s*(\/\/|\/\*|\*)/;

describe('comments', () => {
  it(`are wrapped at ${WIDTH} characters, as the formatter lays out code`, () => {
    expect(files.length).toBeGreaterThan(100);
    const over: string[] = [];
    for (const file of files) {
      const lines = readFileSync(`${root}/${file}`, 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (commentLine.test(line) && [...line].length > WIDTH) over.push(`${file}:${i + 1} (${[...line].length})`);
      });
    }
    expect(over).toEqual([]);
  });
});
