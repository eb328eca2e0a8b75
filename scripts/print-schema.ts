/**
 * `npm run schema`: writes schema.graphql (the SDL of the Pothos schema, in builder order) at the
 * repo root (`npm run check:generated` tells when it is stale).
 * Codegen reads schema.graphql rather than the .ts schema (../shared/STACK-NOTES.md), so the two must agree.
 */
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { printSchema } from 'graphql';
import { schema } from '../src/schema/index.js';

export const schemaFile = fileURLToPath(new URL('../schema.graphql', import.meta.url));

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

/** undefined when schema.graphql is up to date, else a one-line reason. */
export function schemaFileProblem(): string | undefined {
  const current = readIfExists(schemaFile);
  if (current === undefined) return 'schema.graphql is missing: run `npm run schema`';
  if (current !== printedSchema())
    return 'schema.graphql differs from the schema built in src/schema: run `npm run schema`';
  return undefined;
}

function main(): void {
  writeFileSync(schemaFile, printedSchema());
  process.stdout.write('wrote schema.graphql\n');
}

// Run only as a script (`tsx scripts/print-schema.ts`), not when imported by a test or another script.
const invokedAs = process.argv[1];
if (invokedAs !== undefined && realpathSync(invokedAs) === realpathSync(fileURLToPath(import.meta.url))) main();
