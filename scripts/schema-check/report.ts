import type { CheckedChange, CheckReport, Deprecation } from './check.js';
import type { KnownOperation } from './operations.js';
import { describeUses } from './usage.js';

/** What the report says of where its inputs came from. */
export interface ReportContext {
  /** The base and the new schema, as named (`2122226^ (1a861fe)`, `the working tree`). */
  readonly base: string;
  readonly next: string;
  /** Why that base (base.ts). */
  readonly why: string;
  /** Each source of operations and how many it held. */
  readonly sources: readonly { readonly path: string; readonly operations: number }[];
  /** Where the usage came from, if given. */
  readonly usage: string | undefined;
}

const order: Record<CheckedChange['class'], number> = { breaking: 0, dangerous: 1, safe: 2 };

/** Rows as columns padded to their widest cell (the last column left as it is). */
function table(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows.map((row) =>
    row
      .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join('  ')
      .trimEnd(),
  );
}

const operationNamed = (operation: KnownOperation) => `${operation.name} (${operation.file})`;
const names = (operations: readonly KnownOperation[]) =>
  [...new Set(operations.map((operation) => operation.name))].join(', ');
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** The lines of one breaking or dangerous change against the operations and the usage. */
function changeLines(change: CheckedChange, usagePeriod: string | undefined, known: number): string[] {
  const lines = [`${change.class} \`${change.coordinate}\`: ${change.message}`];
  if (known === 0) lines.push('  no known operations to check it against');
  else if (change.breaks.length === 0 && change.touches.length === 0)
    lines.push(
      `  ${change.class === 'breaking' ? 'breaks no known operation' : 'touches no known operation'}; leaves all ${known} alone`,
    );
  else {
    if (change.breaks.length > 0)
      lines.push(
        `  breaks ${plural(change.breaks.length, 'operation')}: ${change.breaks.map(operationNamed).join(', ')}`,
      );
    if (change.touches.length > 0)
      lines.push(
        `  may change what ${plural(change.touches.length, 'operation')} read${change.touches.length === 1 ? 's' : ''}: ${change.touches.map(operationNamed).join(', ')}`,
      );
    if (change.leavesAlone.length > 0)
      lines.push(`  leaves ${change.leavesAlone.length} alone: ${names(change.leavesAlone)}`);
  }
  if (change.uses !== undefined && usagePeriod !== undefined) {
    const reached =
      change.reaches.length === 1 && change.reaches[0] === change.coordinate
        ? ''
        : ` (of ${change.reaches.map((c) => `\`${c}\``).join(', ')})`;
    lines.push(`  \`${change.coordinate}\`: ${describeUses(change.uses, usagePeriod)}${reached}`);
  }
  if (change.class === 'breaking')
    lines.push(
      change.acknowledged ? '  acknowledged in CHANGELOG.md (Unreleased)' : '  not acknowledged in CHANGELOG.md',
    );
  return lines;
}

function deprecationLine(deprecation: Deprecation, usagePeriod: string | undefined): string {
  const selected =
    deprecation.selectedBy.length === 0
      ? 'selected by no known operation'
      : `selected by ${deprecation.selectedBy.map(operationNamed).join(', ')}`;
  let uses = '';
  if (deprecation.uses !== undefined && usagePeriod !== undefined) {
    uses = `; ${describeUses(deprecation.uses, usagePeriod)}${deprecation.uses.uses === 0 && deprecation.selectedBy.length === 0 ? ': ready to remove' : ''}`;
  }
  return `\`${deprecation.coordinate}\` (${JSON.stringify(deprecation.reason)}): ${selected}${uses}`;
}

/** The report as the terminal shows it. */
export function formatReport(report: CheckReport, context: ReportContext): string {
  const period = report.usagePeriod;
  const out: string[] = [`schema.graphql at ${context.base} -> ${context.next}`, `  base: ${context.why}`];
  const known = report.operations.length - report.alreadyInvalid.length;
  out.push(
    `  operations: ${report.operations.length} (${context.sources.map((source) => `${source.path}: ${source.operations}`).join(', ') || 'none'})`,
  );
  out.push(
    `  usage: ${context.usage === undefined ? "not given (--usage <Prometheus URL or file> adds each change's uses)" : context.usage}`,
  );
  out.push('');
  if (report.changes.length === 0) out.push('No changes to the schema.');
  else {
    const sorted = [...report.changes].sort((a, b) => order[a.class] - order[b.class]);
    out.push(
      ...table([
        ['class', 'coordinate', 'change'],
        ['-----', '----------', '------'],
        ...sorted.map((change) => [change.class, change.coordinate, change.message]),
      ]),
    );
    const judged = sorted.filter((change) => change.class !== 'safe');
    if (judged.length > 0) {
      out.push('', 'Breaking and dangerous changes against the operations clients use:');
      for (const change of judged) out.push(...changeLines(change, period, known));
    }
  }
  if (report.deprecations.length > 0) {
    out.push('', 'Deprecated (deprecate, watch the uses fall to zero, then remove):');
    for (const deprecation of report.deprecations) out.push(`  ${deprecationLine(deprecation, period)}`);
  }
  if (report.noLongerValid.length > 0) {
    out.push('', 'Operations the new schema refuses:');
    for (const { operation, invalidAfter } of report.noLongerValid)
      out.push(`  ${operationNamed(operation)}: ${invalidAfter.join(' ')}`);
  }
  if (report.alreadyInvalid.length > 0) {
    out.push('', 'Operations already invalid against the base (not judged):');
    for (const { operation, invalidBefore } of report.alreadyInvalid)
      out.push(`  ${operationNamed(operation)}: ${invalidBefore[0]}`);
  }
  out.push('');
  if (report.failures.length === 0) {
    const breaking = report.changes.filter((change) => change.class === 'breaking').length;
    out.push(
      `OK: ${plural(breaking, 'breaking change')}, ${plural(report.changes.filter((c) => c.class === 'dangerous').length, 'dangerous change')}, ${plural(report.changes.filter((c) => c.class === 'safe').length, 'safe change')}`,
    );
  } else {
    out.push(`FAILED: ${plural(report.failures.length, 'reason')}`);
    for (const failure of report.failures) out.push(`  - ${failure}`);
  }
  return `${out.join('\n')}\n`;
}
