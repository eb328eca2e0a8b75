import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { acknowledgedCoordinates } from '../scripts/schema-check/changelog.js';
import { type CheckedChange, type CheckInput, type CheckReport, checkSchema } from '../scripts/schema-check/check.js';
import { entityKeys } from '../scripts/schema-check/entity-keys.js';
import { loadOperations } from '../scripts/schema-check/operations.js';
import { formatReport } from '../scripts/schema-check/report.js';
import { loadUsage, type Usage, usageFromExposition, usageQuery } from '../scripts/schema-check/usage.js';

/*
 * The schema check (issue 43) on fixtures (test/fixtures/schema-check/): a schema before and after
 * with one change of each kind, a manifest and a folder of operations, the fleet's usage as
 * Prometheus's JSON and as /metrics text. The CLI on a git repository of its own (base choice,
 * CHANGELOG.md) is test/schema-check-cli.test.ts; the gateway's counter, test/schema-usage.test.ts.
 */

const fixtures = fileURLToPath(new URL('./fixtures/schema-check/', import.meta.url));
const read = (name: string) => readFileSync(fixtures + name, 'utf8');
const operations = [
  ...loadOperations(`${fixtures}manifest.json`, fixtures),
  ...loadOperations(`${fixtures}operations`, fixtures),
];

const check = (over: Partial<CheckInput> = {}): Promise<CheckReport> =>
  checkSchema({
    base: read('base.graphql'),
    next: read('next.graphql'),
    operations,
    acknowledged: new Set(),
    strict: false,
    ...over,
  });

const changeAt = (report: CheckReport, coordinate: string): CheckedChange => {
  const found = report.changes.filter((change) => change.coordinate === coordinate && change.class !== 'safe');
  expect(found, coordinate).toHaveLength(1);
  return found[0]!;
};
const named = (list: readonly { name: string }[]) => list.map((operation) => operation.name).sort();

describe('the changes, classified with their coordinates', () => {
  it('classes each kind of change: removed, narrowed, nullable to non-null, enum value added, deprecation, additions', async () => {
    const report = await check();
    const rows = report.changes.map((change) => `${change.class} ${change.coordinate} ${change.type}`);
    expect(rows).toEqual(
      expect.arrayContaining([
        'breaking Head.arUrl FIELD_REMOVED',
        'breaking Query.legacyCount FIELD_REMOVED',
        // A non-null field made nullable, and a union narrowed: what clients read may now be missing.
        'breaking Head.polygons FIELD_TYPE_CHANGED',
        'breaking Result UNION_MEMBER_REMOVED',
        // Nullable to non-null, on the input side: what clients sent without it is refused.
        'breaking Query.head(size:) FIELD_ARGUMENT_TYPE_CHANGED',
        'breaking HeadInput.owner INPUT_FIELD_ADDED',
        'breaking Head.rig(format:) FIELD_ARGUMENT_REMOVED',
        'dangerous Style.COILY ENUM_VALUE_ADDED',
        // Nullable to non-null, on the output side: safe.
        'safe Head.name FIELD_TYPE_CHANGED',
        'safe Head.url FIELD_DEPRECATION_ADDED',
        'safe Query.hair FIELD_ADDED',
        'safe Query.hair(id:) FIELD_ARGUMENT_ADDED',
      ]),
    );
    // @deprecated's directive-usage changes repeat FIELD_DEPRECATION_ADDED: left out.
    expect(rows.filter((row) => row.includes('DIRECTIVE_USAGE'))).toEqual([]);
    expect(report.changes.filter((change) => change.class === 'breaking')).toHaveLength(7);
  });

  it('prints a table of class, coordinate and change, breaking first', async () => {
    const text = formatReport(await check(), { base: 'a', next: 'b', why: 'given', sources: [], usage: undefined });
    const table = text.split('\n').filter((line) => /^(breaking|dangerous|safe) +[^`\s]/.test(line));
    expect(table[0]).toMatch(/^breaking +\S+ +\S/);
    expect(table.at(-1)).toMatch(/^safe /);
    expect(text).toMatch(/^breaking +Head\.arUrl +Field 'arUrl' was removed from object type 'Head'$/m);
    expect(text).toMatch(/^dangerous +Style\.COILY +Enum value 'COILY' was added to enum 'Style'$/m);
    expect(text).toMatch(/^safe +Head\.url +Field 'Head\.url' is deprecated$/m);
  });

  it('finds no change between a schema and itself', async () => {
    const report = await check({ next: read('base.graphql') });
    expect(report.changes).toEqual([]);
    expect(report.failures).toEqual([]);
    expect(formatReport(report, { base: 'a', next: 'b', why: 'given', sources: [], usage: undefined })).toContain(
      'No changes to the schema.',
    );
  });
});

describe('against the operations clients use', () => {
  it('reads a manifest and a folder whose fragments are in other files; an operation already invalid is not judged', async () => {
    expect(operations.map((operation) => `${operation.name} ${operation.file.split(' ')[0]}`).sort()).toEqual([
      'HeadCard manifest.json',
      'HeadStats manifest.json',
      'HeadUrls manifest.json',
      'Rename manifest.json',
      'Search manifest.json',
      'Stale operations/Stale.graphql',
      'Tiny operations/Tiny.graphql',
    ]);
    const report = await check();
    expect(report.alreadyInvalid.map((judged) => judged.operation.name)).toEqual(['Stale']);
    // Tiny's fragment (operations/fragments.graphql) is found: Tiny validates and selects Head.name through it.
    const tiny = report.operations.find((judged) => judged.operation.name === 'Tiny')!;
    expect(tiny.invalidBefore).toEqual([]);
    expect([...tiny.selects]).toEqual(expect.arrayContaining(['Query.heads', 'Head.id', 'Head.name']));
  });

  it('names the operations each breaking change breaks, with their files, and those it leaves alone', async () => {
    const report = await check();
    const arUrl = changeAt(report, 'Head.arUrl');
    expect(named(arUrl.breaks)).toEqual(['HeadCard']);
    expect(arUrl.breaks[0]!.file).toMatch(/^manifest\.json sha256:[0-9a-f]{12}…$/);
    expect(named(arUrl.leavesAlone)).toEqual(['HeadStats', 'HeadUrls', 'Rename', 'Search', 'Tiny']);
    expect(named(changeAt(report, 'Head.polygons').breaks)).toEqual(['HeadStats']);
    expect(named(changeAt(report, 'Query.head(size:)').breaks)).toEqual(['HeadCard']);
    expect(named(changeAt(report, 'Result').breaks)).toEqual(['Search']);
    expect(named(changeAt(report, 'HeadInput.owner').breaks)).toEqual(['Rename']);
    // HeadUrls selects Head.rig without the argument that went: left alone.
    expect(changeAt(report, 'Head.rig(format:)').breaks).toEqual([]);
    expect(named(changeAt(report, 'Head.rig(format:)').leavesAlone)).toContain('HeadUrls');
    const text = formatReport(report, { base: 'a', next: 'b', why: 'given', sources: [], usage: undefined });
    expect(text).toMatch(
      /^breaking `Head\.arUrl`: .*\n {2}breaks 1 operation: HeadCard \(manifest\.json sha256:[0-9a-f]{12}…\)\n {2}leaves 5 alone: HeadStats, HeadUrls, Search, Rename, Tiny$/m,
    );
    expect(text).toMatch(/^breaking `Head\.rig\(format:\)`: .*\n {2}breaks no known operation; leaves all 6 alone$/m);
  });

  it('a dangerous change breaks nothing: it names the operations whose answers it may change', async () => {
    const coily = changeAt(await check(), 'Style.COILY');
    expect(coily.breaks).toEqual([]);
    // HeadCard reads Head.style, HeadUrls passes a Style literal.
    expect(named(coily.touches)).toEqual(['HeadCard', 'HeadUrls']);
  });

  it('fails for each breaking change that breaks a known operation, and for those alone; --strict fails the unacknowledged rest', async () => {
    const report = await check();
    expect(report.failures).toEqual([
      expect.stringMatching(/^`Query\.head\(size:\)` breaks 1 known operation/),
      expect.stringMatching(/^`Head\.arUrl` breaks 1 known operation/),
      expect.stringMatching(/^`Head\.polygons` breaks 1 known operation/),
      expect.stringMatching(/^`Result` breaks 1 known operation/),
      expect.stringMatching(/^`HeadInput\.owner` breaks 1 known operation/),
    ]);
    const strict = await check({ strict: true });
    expect(strict.failures.filter((failure) => !failure.includes('known operation'))).toEqual([
      '`Query.legacyCount` is a breaking change: acknowledge it with a line naming `Query.legacyCount` under "## [Unreleased]" in CHANGELOG.md',
      '`Head.rig(format:)` is a breaking change: acknowledge it with a line naming `Head.rig(format:)` under "## [Unreleased]" in CHANGELOG.md',
    ]);
  });

  it('a breaking change that breaks no known operation passes without --strict', async () => {
    // Only the unused changes: the argument removed and the deprecated field removed.
    const next = read('base.graphql')
      .replace('rig(format: String): String', 'rig: String')
      .replace(/ {2}legacyCount: Int @deprecated\(reason: "Count the heads\."\)\n/, '');
    const report = await check({ next });
    expect(report.changes.map((change) => `${change.class} ${change.coordinate}`)).toEqual([
      'breaking Query.legacyCount',
      'breaking Head.rig(format:)',
    ]);
    expect(report.failures).toEqual([]);
    expect(formatReport(report, { base: 'a', next: 'b', why: 'given', sources: [], usage: undefined })).toMatch(
      /^OK: 2 breaking changes/m,
    );
    expect((await check({ next, strict: true })).failures).toHaveLength(2);
    // Acknowledged in CHANGELOG.md's Unreleased section, --strict passes them.
    const acknowledged = acknowledgedCoordinates(
      '# Changelog\n\n## [Unreleased]\n### Removed\n- `Query.legacyCount` (deprecated in 0.1.0, no uses in 30 days)\n- `Head.rig(format:)`\n\n## [0.1.0] - 2025-01-01\n',
    );
    const passed = await check({ next, strict: true, acknowledged });
    expect(passed.failures).toEqual([]);
    expect(formatReport(passed, { base: 'a', next: 'b', why: 'given', sources: [], usage: undefined })).toContain(
      'acknowledged in CHANGELOG.md (Unreleased)',
    );
  });
});

describe('CHANGELOG.md acknowledgements', () => {
  it('counts only coordinates in backticks under ## [Unreleased], not under a released version', () => {
    const changelog = [
      '# Changelog',
      '',
      '## [Unreleased]',
      '',
      '### Removed',
      '- `Head.arUrl`, replaced by `Head.assets` (#43)',
      '- Head.polygons without backticks',
      '',
      '## [0.2.0] - 2025-06-01',
      '- `Query.legacyCount`',
    ].join('\n');
    expect([...acknowledgedCoordinates(changelog)].sort()).toEqual(['Head.arUrl', 'Head.assets']);
    expect(acknowledgedCoordinates('# Changelog\n\n## [0.2.0]\n- `Head.arUrl`\n').size).toBe(0);
    expect([...acknowledgedCoordinates('## Unreleased\n- `Result`\n')]).toEqual(['Result']);
  });
});

describe('against the fleet usage', () => {
  let usage: Usage;
  beforeAll(async () => {
    usage = await loadUsage(`${fixtures}usage.json`, '7d');
  });

  it("says each change's uses and clients in the period, from Prometheus's JSON", async () => {
    const report = await check({ usage });
    const text = formatReport(report, { base: 'a', next: 'b', why: 'given', sources: [], usage: 'usage.json' });
    expect(text).toContain('`Head.arUrl`: 1,204 uses by `ios 3.2` and `web` in 7 days');
    expect(changeAt(report, 'Head.rig(format:)').uses).toEqual({ uses: 0, clients: [] });
    expect(text).toContain('`Head.rig(format:)`: no uses in 7 days');
    // A change reaching other coordinates counts their uses: an enum value added, by those reading the enum.
    expect(changeAt(report, 'Style.COILY').reaches).toEqual([
      'Head.style',
      'HeadInput.style',
      'Query.heads(style:)',
      'Style.COILY',
    ]);
  });

  it('removing a field with uses in the period fails, deprecated or not, acknowledged or not', async () => {
    const next = read('base.graphql').replace(/ {2}legacyCount: Int @deprecated\(reason: "Count the heads\."\)\n/, '');
    const report = await check({ next, usage, acknowledged: new Set(['Query.legacyCount']), strict: true });
    expect(report.failures).toEqual([
      '`Query.legacyCount` has 3 uses in 7 days: deprecate it and wait for its uses to fall to zero first',
    ]);
    // With no uses in the period, the acknowledged removal passes.
    const quiet = await check({
      next,
      usage: { period: 'in 7 days', byCoordinate: new Map() },
      acknowledged: new Set(['Query.legacyCount']),
      strict: true,
    });
    expect(quiet.failures).toEqual([]);
  });

  it('reports each @deprecated coordinate with the operations selecting it and its uses', async () => {
    const report = await check({ usage });
    expect(
      report.deprecations.map((d) => ({
        coordinate: d.coordinate,
        reason: d.reason,
        selectedBy: named(d.selectedBy),
        uses: d.uses?.uses,
      })),
    ).toEqual([{ coordinate: 'Head.url', reason: 'Use assets.', selectedBy: ['HeadUrls'], uses: 50 }]);
    const text = formatReport(report, { base: 'a', next: 'b', why: 'given', sources: [], usage: 'usage.json' });
    expect(text).toMatch(
      /^ {2}`Head\.url` \("Use assets\."\): selected by HeadUrls \(manifest\.json sha256:[0-9a-f]{12}…\); 50 uses by `web` in 7 days$/m,
    );
    // Before the change, Query.legacyCount was the deprecated one: no operation, no use, ready to go.
    const before = await check({
      next: read('base.graphql'),
      usage: { period: 'in 30 days', byCoordinate: new Map() },
    });
    expect(formatReport(before, { base: 'a', next: 'b', why: 'given', sources: [], usage: 'x' })).toContain(
      '`Query.legacyCount` ("Count the heads."): selected by no known operation; no uses in 30 days: ready to remove',
    );
  });

  it('reads /metrics text too: several replicas summed, other metrics ignored, escaped label values undone', () => {
    const exposition = usageFromExposition(read('usage.prom'));
    expect(exposition.byCoordinate.get('Head.arUrl')).toEqual([
      { clientName: 'ios', clientVersion: '3.2', uses: 1000 },
      { clientName: 'web', clientVersion: 'unknown', uses: 204 },
    ]);
    expect(exposition.byCoordinate.get('Head.url')).toEqual([
      { clientName: 'we"b\\x', clientVersion: 'unknown', uses: 50 },
    ]);
    expect([...exposition.byCoordinate.keys()].sort()).toEqual(['Head.arUrl', 'Head.url', 'Query.legacyCount']);
    expect(exposition.period).toBe('since each gateway started');
  });

  it("asks a Prometheus URL's query API for the period's increase by coordinate and client", async () => {
    const asked: string[] = [];
    const server: Server = createServer((request, response) => {
      asked.push(request.url!);
      response.setHeader('content-type', 'application/json');
      response.end(read('usage.json'));
    });
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    try {
      const { port } = server.address() as AddressInfo;
      const fromServer = await loadUsage(`http://127.0.0.1:${port}/`, '30d');
      const url = new URL(asked[0]!, 'http://x');
      expect(url.pathname).toBe('/api/v1/query');
      expect(url.searchParams.get('query')).toBe(
        'sum by (coordinate, client_name, client_version) (increase(gateway_schema_coordinate_uses_total[30d]))',
      );
      expect(fromServer.period).toBe('in 30 days');
      expect(fromServer.byCoordinate.get('Head.arUrl')!.reduce((sum, use) => sum + use.uses, 0)).toBe(1204);
    } finally {
      server.close();
    }
  });

  it('refuses a period that is not one Prometheus duration, and an answer that is not an instant vector', async () => {
    expect(() => usageQuery('7d) or vector(1')).toThrow(/--period: expected a Prometheus duration/);
    expect(() => usageQuery('0d')).toThrow(/--period/);
    const fetcher = (async () =>
      new Response(JSON.stringify({ status: 'error', error: 'bad' }), { status: 200 })) as typeof fetch;
    await expect(loadUsage('http://prometheus.invalid', '7d', fetcher)).rejects.toThrow(
      /expected Prometheus's answer to an instant query/,
    );
  });
});

describe('the subgraph SDL: entity keys', () => {
  const subgraph = readFileSync(new URL('../schema.subgraph.graphql', import.meta.url), 'utf8');
  const rekeyed = subgraph.replace(
    'type Head implements Node @key(fields: "uuid")',
    'type Head implements Node @key(fields: "id")',
  );

  it('reads the keys of the committed subgraph SDL: Head by uuid, nothing else', () => {
    expect(entityKeys(subgraph)).toEqual(new Map([['Head', new Set(['uuid'])]]));
  });

  it('a changed key is breaking (the old one removed) and fails the check until CHANGELOG.md names the entity', async () => {
    expect(rekeyed).not.toBe(subgraph);
    const same = { base: read('base.graphql'), next: read('base.graphql') };
    const report = await check({ ...same, subgraph: { base: subgraph, next: rekeyed } });
    expect(report.changes.map((change) => `${change.class} ${change.coordinate} ${change.type}`)).toEqual([
      'breaking Head ENTITY_KEY_REMOVED',
      'safe Head ENTITY_KEY_ADDED',
    ]);
    expect(report.failures).toEqual([
      expect.stringMatching(/^`Head`: Key "uuid" removed from entity "Head" .* CHANGELOG\.md$/),
    ]);
    const acknowledged = await check({
      ...same,
      subgraph: { base: subgraph, next: rekeyed },
      acknowledged: new Set(['Head']),
    });
    expect(acknowledged.failures).toEqual([]);
    // Unchanged: nothing to say.
    expect((await check({ ...same, subgraph: { base: subgraph, next: subgraph } })).changes).toEqual([]);
  });
});
