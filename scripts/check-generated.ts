/**
 * `npm run check:generated`: fails (exit 1) when a committed generated artifact is stale, naming
 * each stale file. It regenerates in memory and compares with the working tree, so it needs no
 * git, never rewrites a file, and also catches files that are missing, untracked or left over:
 *   - schema.graphql and schema.subgraph.graphql against the schemas built by src/schema (scripts/print-schema.ts);
 *   - src/generated/** against what codegen.ts makes from that fresh schema and operations/*.graphql;
 *   - README.md's configuration table against src/config/environment.ts (scripts/config-table.ts).
 * Fix with `npm run generate` (schema, codegen, then the table) and commit the result.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import codegenConfig from '../codegen.js';
import { readmeTableProblem } from './config-table.js';
import { printedSchema, schemaFileProblems } from './print-schema.js';

const root = fileURLToPath(new URL('..', import.meta.url));

// The CommonJS build, as the `graphql-codegen` bin uses: it resolves the `client` preset from the
// project (our @graphql-codegen/client-preset 6.x). The ESM build imports it relative to the cli
// package instead and picks the older client-preset nested under @graphql-codegen/cli, whose
// output differs, so every file would look stale.
const { generate } = createRequire(import.meta.url)('@graphql-codegen/cli') as typeof import('@graphql-codegen/cli');
const stale: string[] = [];

stale.push(...schemaFileProblems());
const tableProblem = readmeTableProblem();
if (tableProblem !== undefined) stale.push(tableProblem);

// Codegen runs against the schema the code builds now (in a temp file), so a stale
// schema.graphql does not hide stale client types or make them look stale.
const temp = mkdtempSync(join(tmpdir(), 'check-generated-'));
try {
  const freshSchema = join(temp, 'schema.graphql');
  writeFileSync(freshSchema, printedSchema());
  const outputs = (await generate({ ...codegenConfig, schema: freshSchema, cwd: root, silent: true }, false)) as {
    filename: string;
    content: string;
  }[];

  const outputDirs = Object.keys(codegenConfig.generates).map((dir) => resolve(root, dir));
  const expected = new Map(outputs.map((o) => [resolve(root, o.filename), o.content]));
  for (const [file, content] of expected) {
    let current: string | undefined;
    try {
      current = readFileSync(file, 'utf8');
    } catch {
      current = undefined;
    }
    const name = relative(root, file);
    if (current === undefined) stale.push(`${name} is missing: run \`npm run codegen\``);
    else if (current !== content) stale.push(`${name} differs from what codegen makes: run \`npm run codegen\``);
  }
  // A file codegen no longer makes (an operation renamed or removed) is stale too.
  for (const dir of outputDirs) {
    if (!existsSync(dir)) continue;
    for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const file = join(entry.parentPath, entry.name);
      if (!expected.has(file))
        stale.push(`${relative(root, file)} is not made by codegen any more: delete it, then run \`npm run codegen\``);
    }
  }
} finally {
  rmSync(temp, { recursive: true, force: true });
}

if (stale.length > 0) {
  for (const line of stale) process.stderr.write(`stale: ${line}\n`);
  process.stderr.write(
    'Generated files are out of date: run `npm run generate` and commit schema.graphql, schema.subgraph.graphql, src/generated/ and README.md.\n',
  );
  process.exit(1);
}
process.stdout.write(
  "schema.graphql, schema.subgraph.graphql, src/generated/ and README.md's configuration table are up to date\n",
);
