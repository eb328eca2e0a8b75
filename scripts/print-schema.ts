/**
 * `npm run schema`: writes schema.graphql (the SDL of the Pothos schema, in builder order) and schema.subgraph.graphql
 * (the SDL a federation router composes: src/schema/subgraph.ts) at the repo root (`npm run check:generated` tells
 * when either is stale). Codegen reads schema.graphql rather than the .ts schema (../shared/STACK-NOTES.md), so the
 * two must agree.
 */
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { printSchema } from 'graphql';
import { schema } from '../src/schema/index.js';
import { subgraphSdl } from '../src/schema/subgraph.js';

export const schemaFile = fileURLToPath(new URL('../schema.graphql', import.meta.url));
export const subgraphSchemaFile = fileURLToPath(new URL('../schema.subgraph.graphql', import.meta.url));

/** What schema.graphql must hold: the printed schema (builder order) with one trailing newline. */
export function printedSchema(): string {
  return `${printSchema(schema)}\n`;
}

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** What schema.subgraph.graphql must hold: the subgraph's SDL, with one trailing newline. */
export const printedSubgraphSchema = (): string => `${subgraphSdl}\n`;

/** A one-line reason for each of schema.graphql and schema.subgraph.graphql that is not up to date. */
export function schemaFileProblems(): string[] {
  const problems: string[] = [];
  for (const [file, printed] of [
    [schemaFile, printedSchema()],
    [subgraphSchemaFile, printedSubgraphSchema()],
  ] as const) {
    const name = file.slice(file.lastIndexOf('/') + 1);
    const current = readIfExists(file);
    if (current === undefined) problems.push(`${name} is missing: run \`npm run schema\``);
    else if (current !== printed)
      problems.push(`${name} differs from the schema built in src/schema: run \`npm run schema\``);
  }
  return problems;
}

function main(): void {
  writeFileSync(schemaFile, printedSchema());
  writeFileSync(subgraphSchemaFile, printedSubgraphSchema());
  process.stdout.write('wrote schema.graphql and schema.subgraph.graphql\n');
}

// Run only as a script (`tsx scripts/print-schema.ts`), not when imported by a test or another script.
const invokedAs = process.argv[1];
if (invokedAs !== undefined && realpathSync(invokedAs) === realpathSync(fileURLToPath(import.meta.url))) main();
