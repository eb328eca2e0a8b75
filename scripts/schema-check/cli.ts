import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { type BaseChoice, chooseBase, describeRef, gitIn, schemaAt } from './base.js';
import { acknowledgedCoordinates } from './changelog.js';
import { checkSchema } from './check.js';
import { type KnownOperation, loadOperations } from './operations.js';
import { formatReport } from './report.js';
import { checkedPeriod, loadUsage, type Usage } from './usage.js';

/**
 * The trusted-documents manifest `npm run codegen` writes: the operations the apps ship
 * (docs/clients.md#trusted-documents).
 */
export const MANIFEST = 'src/generated/persisted-documents.json';
export const CHANGELOG = 'CHANGELOG.md';
const SCHEMA = 'schema.graphql';
/** The Federation subgraph's SDL: its entities' keys are checked beside schema.graphql, where both commits have it. */
const SUBGRAPH_SCHEMA = 'schema.subgraph.graphql';

export const usageText = `npm run schema:check [-- options]

Compares schema.graphql with a base commit's (and schema.subgraph.graphql's entity keys), classifies each change (breaking, dangerous, safe),
checks the breaking and dangerous ones against the operations clients use, and with --usage
against the fleet's uses. Exit 1 when it fails, 2 when it cannot run.

  --base <ref>        the commit to compare with (default: SCHEMA_CHECK_BASE, else the merge base
                      with main, else the last release, else the commit that started CHANGELOG.md)
  --head <ref>        compare that commit's schema.graphql (and CHANGELOG.md) instead of the working tree's
  --strict            a breaking change fails unless CHANGELOG.md acknowledges it, even when it breaks no known operation
  --documents <path>  more operations: a manifest (.json), a .graphql file or a folder of them (repeatable);
                      ${MANIFEST} is always read
  --usage <source>    the fleet's usage: a Prometheus URL (its API is queried), or a file (that query's JSON, or /metrics text)
  --period <duration> the usage period asked of Prometheus (default 7d)
`;

export interface CliRun {
  /** The repository (its schema.graphql, CHANGELOG.md, manifest and git history). */
  readonly cwd: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly fetch?: typeof fetch;
}

export interface CliResult {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

function options(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    options: {
      base: { type: 'string' },
      head: { type: 'string' },
      strict: { type: 'boolean', default: false },
      documents: { type: 'string', multiple: true, default: [] },
      usage: { type: 'string' },
      period: { type: 'string', default: '7d' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  }).values;
}

/** `npm run schema:check` on the repository at `run.cwd`: the report on stdout, the exit code it ends with. */
export async function runSchemaCheck(argv: readonly string[], run: CliRun): Promise<CliResult> {
  let values: ReturnType<typeof options>;
  try {
    values = options(argv);
    checkedPeriod(values.period);
  } catch (error) {
    return { exitCode: 2, stdout: '', stderr: `schema:check: ${(error as Error).message}\n\n${usageText}` };
  }
  if (values.help) return { exitCode: 0, stdout: usageText, stderr: '' };
  const git = gitIn(run.cwd);
  const at = (path: string) => resolve(run.cwd, path);
  const fromHead = (path: string) =>
    values.head === undefined
      ? existsSync(at(path))
        ? readFileSync(at(path), 'utf8')
        : undefined
      : schemaAt(git, values.head, path);
  try {
    const changelog = fromHead(CHANGELOG);
    const envBase = run.env.SCHEMA_CHECK_BASE;
    const given: BaseChoice | undefined =
      values.base !== undefined
        ? { ref: values.base, why: 'given with --base' }
        : envBase
          ? { ref: envBase, why: 'given with SCHEMA_CHECK_BASE' }
          : undefined;
    const base = chooseBase(git, changelog, given);
    if (base === undefined)
      return {
        exitCode: 0,
        stdout: 'schema:check: no commit to compare with (a repository of one commit): nothing to check\n',
        stderr: '',
      };
    const baseSchema = schemaAt(git, base.ref, SCHEMA);
    if (baseSchema === undefined)
      return {
        exitCode: 0,
        stdout: `schema:check: ${base.ref} (${base.why}) has no ${SCHEMA}: nothing to compare\n`,
        stderr: '',
      };
    const nextSchema = fromHead(SCHEMA);
    if (nextSchema === undefined)
      throw new Error(`no ${SCHEMA} ${values.head === undefined ? 'in the working tree' : `at ${values.head}`}`);
    const sources = [...(existsSync(at(MANIFEST)) ? [MANIFEST] : []), ...values.documents];
    const loaded = sources.map((path) => ({ path, operations: loadOperations(at(path), run.cwd) }));
    const operations: KnownOperation[] = loaded.flatMap((source) => source.operations);
    const usage: Usage | undefined =
      values.usage === undefined
        ? undefined
        : await loadUsage(
            /^https?:\/\//.test(values.usage) ? values.usage : at(values.usage),
            values.period,
            run.fetch,
          );
    const baseSubgraph = schemaAt(git, base.ref, SUBGRAPH_SCHEMA);
    const nextSubgraph = fromHead(SUBGRAPH_SCHEMA);
    const report = await checkSchema({
      base: baseSchema,
      next: nextSchema,
      subgraph:
        baseSubgraph === undefined || nextSubgraph === undefined
          ? undefined
          : { base: baseSubgraph, next: nextSubgraph },
      operations,
      usage,
      acknowledged: acknowledgedCoordinates(changelog ?? ''),
      strict: values.strict,
    });
    const context = {
      base: describeRef(git, base.ref),
      next: values.head === undefined ? 'the working tree' : describeRef(git, values.head),
      why: base.why,
      sources: loaded.map((source) => ({ path: source.path, operations: source.operations.length })),
      usage: values.usage === undefined || usage === undefined ? undefined : `${values.usage} (${usage.period})`,
    };
    return { exitCode: report.failures.length === 0 ? 0 : 1, stdout: formatReport(report, context), stderr: '' };
  } catch (error) {
    return { exitCode: 2, stdout: '', stderr: `schema:check: ${(error as Error).message}\n` };
  }
}
