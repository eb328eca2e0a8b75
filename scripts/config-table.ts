/**
 * `npm run config-table` (part of `npm run generate`): writes README.md's configuration table,
 * between its two markers, from the environment's schema (src/config/environment.ts): each
 * variable's name, default, accepted values and description, in the schema's order.
 * `npm run check:generated` tells when the table is stale.
 */
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { environment } from '../src/config/environment.js';
import { expectations, variableDocs } from '../src/config/values.js';

export const readmeFile = fileURLToPath(new URL('../README.md', import.meta.url));

const BEGIN_TAG = '<!-- config-table:begin';
const BEGIN = `${BEGIN_TAG}: generated from src/config/environment.ts by \`npm run generate\` -->`;
const END = '<!-- config-table:end -->';

/** The schema a variable's value was given, inside its default, optional and transforms. */
function inner(schema: z.ZodType): z.ZodType | undefined {
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional) return schema.unwrap() as z.ZodType;
  if (schema instanceof z.ZodPipe) return schema.in as z.ZodType;
  return undefined;
}

/** What a variable accepts, as its refusal words it; undefined when no kind of value in it says. */
export function acceptedBy(schema: z.ZodType): string | undefined {
  for (let at: z.ZodType | undefined = schema; at !== undefined; at = inner(at)) {
    const found = expectations.get(at);
    if (found !== undefined) return found.expected;
  }
  return undefined;
}

const MIB = 1024 * 1024;

/** A default as an operator writes it; a byte count of whole MiB says so too. */
function defaultCell(name: string, value: unknown, unset: string | undefined): string {
  if (value === undefined) return unset ?? '';
  if (typeof value === 'number' && name.endsWith('_BYTES') && value >= MIB && value % MIB === 0)
    return `${value} (${value / MIB} MiB)`;
  return String(value);
}

/** A table cell: a `|` would end it, a line break would end the row. */
const cell = (text: string) => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** Each variable of the environment: its name, default cell, accepted values and description. */
export function configRows(): {
  name: string;
  defaultValue: string;
  accepts: string | undefined;
  description: string | undefined;
}[] {
  return Object.entries(environment.shape).map(([name, schema]) => {
    const doc = variableDocs.get(schema);
    // What the variable becomes when unset: its default, as the gateway reads it.
    const unsetValue = schema.safeParse(undefined);
    return {
      name,
      defaultValue: defaultCell(name, unsetValue.success ? unsetValue.data : undefined, doc?.unset),
      accepts: acceptedBy(schema),
      description: doc?.description,
    };
  });
}

/** The table, markers included. */
export function configTable(): string {
  const rows = configRows().map(
    (row) =>
      `| \`${row.name}\` | ${cell(row.defaultValue)} | ${cell(row.accepts ?? '')} | ${cell(row.description ?? '')} |`,
  );
  return [BEGIN, '| variable | default | accepts | meaning |', '|---|---|---|---|', ...rows, END].join('\n');
}

/** README.md with its table replaced by `table`; undefined when the markers are not there, once each, in order. */
export function withTable(readme: string, table: string): string | undefined {
  const begin = readme.indexOf(BEGIN_TAG);
  const end = readme.indexOf(END);
  if (begin < 0 || end < begin || readme.indexOf(BEGIN_TAG, begin + 1) >= 0 || readme.indexOf(END, end + 1) >= 0)
    return undefined;
  return readme.slice(0, begin) + table + readme.slice(end + END.length);
}

/** undefined when README.md's table is current, else a one-line reason. */
export function readmeTableProblem(readme: string = readFileSync(readmeFile, 'utf8')): string | undefined {
  const current = withTable(readme, configTable());
  if (current === undefined)
    return `README.md needs one \`${BEGIN_TAG} … -->\` and one \`${END}\` after it, around the configuration table`;
  if (current !== readme)
    return 'README.md: the configuration table differs from src/config/environment.ts: run `npm run config-table`';
  return undefined;
}

function main(): void {
  const readme = readFileSync(readmeFile, 'utf8');
  const written = withTable(readme, configTable());
  if (written === undefined) {
    process.stderr.write(`${readmeTableProblem(readme)}\n`);
    process.exit(1);
  }
  writeFileSync(readmeFile, written);
  process.stdout.write('wrote the configuration table of README.md\n');
}

// Run only as a script (`tsx scripts/config-table.ts`), not when imported by a test or another script.
const invokedAs = process.argv[1];
if (invokedAs !== undefined && realpathSync(invokedAs) === realpathSync(fileURLToPath(import.meta.url))) main();
