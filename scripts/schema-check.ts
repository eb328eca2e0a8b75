/**
 * `npm run schema:check [-- --base <ref>] [--strict] [--documents <path>]... [--usage <url|file> [--period 7d]]`:
 * the changes to schema.graphql since a base commit, against the operations clients use and the
 * fleet's usage (scripts/schema-check/: check.ts is the check, cli.ts its options;
 * docs/schema-changes.md). CI runs it with --strict (.ci/run).
 */
import { runSchemaCheck } from './schema-check/cli.js';

const result = await runSchemaCheck(process.argv.slice(2), { cwd: process.cwd(), env: process.env });
process.stdout.write(result.stdout);
process.stderr.write(result.stderr);
process.exitCode = result.exitCode;
