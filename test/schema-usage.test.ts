import { Writable } from 'node:stream';
import { buildSchema, type OperationDefinitionNode, parse, printSchema } from 'graphql';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSchema } from '../scripts/schema-check/check.js';
import { formatReport } from '../scripts/schema-check/report.js';
import { type Usage, usageFromExposition } from '../scripts/schema-check/usage.js';
import { schema as gatewaySchema } from '../src/schema/index.js';
import { DEPRECATION_LOG_INTERVAL_MS, useCoordinateUsage } from '../src/server/documents/coordinate-usage.js';
import { selectedCoordinates } from '../src/server/documents/coordinates.js';
import type { HttpIncoming } from '../src/server/incoming.js';
import type { ClientIdentity } from '../src/server/instruments/client-awareness.js';
import { createLogger } from '../src/server/instruments/logger.js';
import { SchemaUsageMetrics } from '../src/server/instruments/usage-metrics.js';
import { OperationState } from '../src/server/operation-state.js';
import { RequestState } from '../src/server/request-state.js';
import { post, startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * Field usage from the fleet (issue 43): the gateway counts the schema coordinates each operation
 * selects, by the client that sent it (client awareness's bounded labels), in
 * gateway_schema_coordinate_uses_total, read here as `npm run schema:check -- --usage` reads a
 * gateway's /metrics (usageFromExposition); a client's use of a deprecated coordinate is logged at
 * most once a minute.
 */

const METRIC = 'gateway_schema_coordinate_uses_total';
const apollo = (name: string, version?: string) => ({
  'apollographql-client-name': name,
  ...(version === undefined ? {} : { 'apollographql-client-version': version }),
});

const scrape = async (t: TestGateway) => (await t.gateway.fetch('http://gateway/metrics')).text();
/** The counter's samples, as the check reads them: coordinate → `name version` → uses. */
async function usesOn(t: TestGateway): Promise<Record<string, Record<string, number>>> {
  const usage = usageFromExposition(await scrape(t));
  return Object.fromEntries(
    [...usage.byCoordinate].map(([coordinate, clients]) => [
      coordinate,
      Object.fromEntries(clients.map((c) => [`${c.clientName} ${c.clientVersion}`, c.uses])),
    ]),
  );
}

const card =
  'query Card($id: ID!) { head(id: $id) { __typename ...Bits hair { name } } } fragment Bits on Head { name url }';

describe('the coordinates each operation selects, by client, in /metrics', () => {
  let t: TestGateway;
  let id: string;
  beforeAll(async () => {
    t = await startTestGateway();
    id = t.reference.store.headIds()[0]!;
  });
  afterAll(() => t.close());

  it('counts fields (through fragments too), the arguments given, per client name and version; __typename is no coordinate', async () => {
    for (let i = 0; i < 2; i++)
      expect((await post(t, { query: card, variables: { id } }, apollo('ios', '3.2'))).body.errors).toBeUndefined();
    await post(t, { query: card, variables: { id } }, { 'graphql-client-name': 'web' });
    await post(t, { query: card, variables: { id } });
    const uses = await usesOn(t);
    for (const coordinate of ['Query.head', 'Query.head(id:)', 'Head.name', 'Head.url', 'Head.hair', 'Hair.name']) {
      expect(uses[coordinate], coordinate).toMatchObject({ 'ios 3.2': 2, 'web unknown': 1, 'unknown unknown': 1 });
    }
    expect(Object.keys(uses).filter((coordinate) => coordinate.includes('__'))).toEqual([]);
  });

  it('a scrape adds only what came since the last: the counts are not added twice', async () => {
    await post(t, { query: card, variables: { id } }, apollo('scraper', '1'));
    expect((await usesOn(t))['Head.name']!['scraper 1']).toBe(1);
    expect((await usesOn(t))['Head.name']!['scraper 1']).toBe(1);
    await post(t, { query: card, variables: { id } }, apollo('scraper', '1'));
    expect((await usesOn(t))['Head.name']!['scraper 1']).toBe(2);
    expect((await usesOn(t))['Head.name']!['scraper 1']).toBe(2);
  });

  it("counts a batch's operations each, not one that fails validation", async () => {
    const batch = [
      { query: '{ heads(first: 2, search: "Head") { totalCount } }' },
      { query: '{ heads(first: 1) { totalCount } }' },
      { query: '{ heads(first: 1) { nodes { nope } } }' },
    ];
    const answers = (await post(t, batch, apollo('batcher', '1'))).body as unknown as {
      errors?: { message: string }[];
    }[];
    expect(answers[2]!.errors?.[0]?.message).toMatch(/Cannot query field "nope"/);
    const uses = await usesOn(t);
    const batcher = (coordinate: string) => uses[coordinate]?.['batcher 1'];
    expect(
      [
        'Query.heads',
        'Query.heads(first:)',
        'Query.heads(search:)',
        'HeadConnection.totalCount',
        'HeadConnection.nodes',
      ].map(batcher),
    ).toEqual([2, 2, 1, 2, undefined]);
  });

  it('labels clients as client awareness bounds them: a hostile name is `invalid`, nothing of it reaches /metrics', async () => {
    await post(t, { query: '{ heads(first: 1) { totalCount } }' }, apollo('evil"} 1 fake_metric{x="', '1'));
    const text = await scrape(t);
    expect(text).not.toContain('fake_metric');
    expect(text).toMatch(
      new RegExp(
        `^${METRIC}\\{coordinate="HeadConnection.totalCount",client_name="invalid",client_version="1"\\} 1$`,
        'm',
      ),
    );
  });

  it('is what schema:check reads: a change to a field the fleet uses names its uses and clients, and fails', async () => {
    for (const client of [apollo('ios-app', '4.0'), apollo('ios-app', '4.0'), { 'graphql-client-name': 'kiosk' }])
      await post(t, { query: card, variables: { id } }, client);
    const usage: Usage = usageFromExposition(await scrape(t));
    expect(usage.byCoordinate.get('Head.url')).toEqual(
      expect.arrayContaining([
        { clientName: 'ios-app', clientVersion: '4.0', uses: 2 },
        { clientName: 'kiosk', clientVersion: 'unknown', uses: 1 },
      ]),
    );
    const base = printSchema(gatewaySchema);
    const at = base.indexOf('\ntype Head ');
    const next =
      base.slice(0, at) + base.slice(at).replace('\n  """Address of the head model file."""\n  url: URL!\n', '\n');
    const report = await checkSchema({
      base,
      next,
      operations: [],
      usage,
      acknowledged: new Set(['Head.url']),
      strict: true,
    });
    expect(report.changes.map((change) => `${change.class} ${change.coordinate}`)).toEqual(['breaking Head.url']);
    const text = formatReport(report, { base: 'a', next: 'b', why: 'given', sources: [], usage: '/metrics' });
    expect(text).toMatch(/`Head\.url`: [\d,]+ uses by .*`ios-app 4\.0`.* since each gateway started/);
    expect(report.failures).toEqual([expect.stringMatching(/^`Head\.url` has [\d,]+ uses since each gateway started/)]);
  });
});

describe('METRICS_SCHEMA_USAGE=false', () => {
  it('counts nothing', async () => {
    const t = await startTestGateway({ env: { METRICS_SCHEMA_USAGE: 'false' } });
    try {
      await post(t, { query: card, variables: { id: t.reference.store.headIds()[0]! } }, apollo('ios', '3.2'));
      expect(await scrape(t)).not.toMatch(new RegExp(`^${METRIC}\\{`, 'm'));
    } finally {
      await t.close();
    }
  });
});

describe('the coordinates of one operation, read once from its document', () => {
  const schema = buildSchema(`
    directive @live on QUERY
    type Query { head(id: ID!, size: Int @deprecated(reason: "Sizes are fixed.")): Head, find(filter: Filter): [Head] }
    type Head { id: ID!, name: String, arUrl: String @deprecated(reason: "Use url."), style: Style }
    enum Style { CURLY WAVY OLD @deprecated(reason: "Gone soon.") }
    input Filter { style: Style, legacy: Boolean @deprecated(reason: "Ignored.") }
  `);
  it('fields, arguments, input fields and enum values written, directives; the deprecated ones apart; each once, sorted', () => {
    const document = parse(`
      query A @live { head(id: "1", size: 2) { ...F name } find(filter: { style: OLD, legacy: true }) { id } }
      query B { find { arUrl } }
      fragment F on Head { name arUrl __typename }
    `);
    const a = selectedCoordinates(schema, document, document.definitions[0] as OperationDefinitionNode);
    expect(a.coordinates).toEqual([
      '@live',
      'Filter.legacy',
      'Filter.style',
      'Head.arUrl',
      'Head.id',
      'Head.name',
      'Query.find',
      'Query.find(filter:)',
      'Query.head',
      'Query.head(id:)',
      'Query.head(size:)',
      'Style.OLD',
    ]);
    expect(a.deprecated).toEqual(['Filter.legacy', 'Head.arUrl', 'Query.head(size:)', 'Style.OLD']);
    // B spreads no fragment: F's fields are not its.
    expect(selectedCoordinates(schema, document, document.definitions[1] as OperationDefinitionNode)).toEqual({
      coordinates: ['Head.arUrl', 'Query.find'],
      deprecated: ['Head.arUrl'],
    });
  });
});

describe('deprecated coordinates in the log', () => {
  const schema = buildSchema(
    'type Query { old: Int @deprecated(reason: "Use new."), older: Int @deprecated(reason: "x"), fresh: Int }',
  );
  const client = (nameLabel: string, versionLabel = 'unknown'): ClientIdentity => ({
    name: nameLabel,
    version: undefined,
    nameLabel,
    versionLabel,
  });

  function harness() {
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger({
      level: 'info',
      destination: new Writable({
        write: (chunk: Buffer, _e, done) => {
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
          done();
        },
      }),
    });
    let clock = 1_000;
    const registry = new Registry();
    const step = useCoordinateUsage({ schema, metrics: new SchemaUsageMetrics(registry), logger, now: () => clock })
      .document!;
    const documents = new Map<string, ReturnType<typeof parse>>();
    const send = (text: string, who: ClientIdentity) => {
      const document = documents.get(text) ?? parse(text);
      documents.set(text, document);
      const incoming = {
        method: 'POST',
        target: '/graphql',
        headers: new Headers(),
        peer: undefined,
        body: null,
        gone: false,
      } as unknown as HttpIncoming;
      const request = RequestState.ofHttp(incoming, { trustProxy: undefined, callerOf: () => undefined });
      request.client = who;
      const operation = new OperationState({ query: text }, request);
      operation.prepared = { text, document, incremental: false, plain: document };
      operation.definition = document.definitions[0] as OperationDefinitionNode;
      step(operation);
    };
    return {
      lines,
      send,
      registry,
      advance: (ms: number) => {
        clock += ms;
      },
    };
  }

  it('says which client selected which deprecated coordinates, at most once a minute per client and coordinate, whatever the operation', async () => {
    const { lines, send, advance, registry } = harness();
    send('query A { old fresh }', client('ios', '3.2'));
    send('query A { old fresh }', client('ios', '3.2'));
    send('query B { old }', client('ios', '3.3'));
    send('query C { fresh }', client('ios', '3.2'));
    send('query A { old fresh }', client('web'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(
      lines.map(({ level, msg, clientName, clientVersion, operationName, coordinates }) => ({
        level,
        msg,
        clientName,
        clientVersion,
        operationName,
        coordinates,
      })),
    ).toEqual([
      {
        level: 40,
        msg: 'deprecated schema coordinates selected',
        clientName: 'ios',
        clientVersion: '3.2',
        operationName: 'A',
        coordinates: ['Query.old'],
      },
      {
        level: 40,
        msg: 'deprecated schema coordinates selected',
        clientName: 'web',
        clientVersion: 'unknown',
        operationName: 'A',
        coordinates: ['Query.old'],
      },
    ]);
    // Another deprecated coordinate of the same client is its own line; a minute later, the first again.
    send('query D { older old }', client('ios', '3.2'));
    advance(DEPRECATION_LOG_INTERVAL_MS - 1);
    send('query A { old fresh }', client('ios', '3.2'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.slice(2).map((line) => line.coordinates)).toEqual([['Query.older']]);
    advance(1);
    send('query A { old fresh }', client('ios', '3.2'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.slice(3).map((line) => [line.operationName, line.coordinates])).toEqual([['A', ['Query.old']]]);
    // Every operation counted all the same.
    const counted = usageFromExposition(await registry.metrics()).byCoordinate.get('Query.old')!;
    expect(Object.fromEntries(counted.map((c) => [`${c.clientName} ${c.clientVersion}`, c.uses]))).toEqual({
      'ios 3.2': 5,
      'ios 3.3': 1,
      'web unknown': 1,
    });
  });
});

describe('the tallies waiting for a scrape', () => {
  it('are bounded: at 1,000 they reach the counter without one (a gateway nobody scrapes keeps none)', () => {
    const metrics = new SchemaUsageMetrics(new Registry());
    const tallies = Array.from({ length: 1_000 }, (_, i) => metrics.tally([`Query.field${i}`], 'web', 'unknown'));
    for (const tally of tallies.slice(0, 999)) metrics.count(tally);
    expect(tallies[0]!.pending).toBe(1);
    metrics.count(tallies[999]!);
    expect(tallies.every((tally) => tally.pending === 0)).toBe(true);
  });
});
