import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { envelop, type Plugin, useEngine, useSchema } from '@envelop/core';
import { OverlappingFieldsCanBeMergedRule, parse, specifiedRules, type ValidationRule, validate } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { schema } from '../src/schema/index.js';
import { incrementalDeliveryRules } from '../src/server/documents/incremental-delivery.js';
import { startTestGateway, type TestGateway, upstreamHead } from './support/gateway.js';
import { planOf } from './support/plan.js';

/*
 * @defer and @stream (GraphQL over HTTP incremental delivery): the planner reads what the initial
 * payload needs, and starts what deferred fragments need beside it, so a slow read of deferred
 * fields never holds the first part back.
 */

let t: TestGateway;
let ids: string[];
const headA = (id: string) => upstreamHead(t, id);

beforeAll(async () => {
  t = await startTestGateway();
  ids = t.reference.store.headIds();
});

afterAll(() => t.close());
beforeEach(() => t.reset());

interface Part {
  readonly body: Record<string, any>;
  /** When it reached the client (performance.now(), the clock the reference upstream records with). */
  readonly at: number;
}

/** Sends a query asking for incremental delivery and reads its parts as they arrive. */
async function parts(
  query: string,
  variables: Record<string, unknown>,
  accept = 'multipart/mixed',
): Promise<{ contentType: string; parts: Part[] }> {
  const response = await t.gateway.fetch('http://gateway/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept },
    body: JSON.stringify({ query, variables }),
  });
  const contentType = response.headers.get('content-type') ?? '';
  const received: Part[] = [];
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = response.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const at = performance.now();
    buffer += decoder.decode(value, { stream: true });
    // Each part (multipart) or event (SSE) carries one JSON object on a line of its own.
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop()!;
    for (const line of lines) {
      const json = line.startsWith('data: ') ? line.slice(6) : line;
      if (json.startsWith('{')) received.push({ body: JSON.parse(json), at });
    }
  }
  return { contentType, parts: received };
}

describe('@defer', () => {
  const query = `query($id: ID!) { head(id: $id) { name hair { name } ... @defer(label: "meta") { headMetadata } } }`;

  it('the first part arrives before the held read of the deferred fields ends', async () => {
    const id = ids.find((i) => headA(i).hair)!;
    t.reference.injectFault('getHeadExtById', { kind: 'latency', ms: 300 });
    const { contentType, parts: received } = await parts(query, { id });
    expect(contentType).toMatch(/^multipart\/mixed/);
    const [first, ...rest] = received;
    expect(first!.body).toMatchObject({
      data: { head: { name: headA(id).name, hair: { name: headA(id).hair.name } } },
      hasNext: true,
    });
    expect(first!.body.data.head.headMetadata).toBeUndefined();
    // Arrived while the 300 ms metadata read was still in the upstream's hands.
    expect(first!.at).toBeLessThan(t.calls('getHeadExtById')[0]!.endedAt!);
    const deferred = rest.flatMap((part) => part.body.incremental ?? []);
    expect(deferred).toEqual([{ data: { headMetadata: headA(id).head_metadata }, path: ['head'], label: 'meta' }]);
    expect(rest.at(-1)!.body.hasNext).toBe(false);
    // Get Head By Id for the first part, Get Head Ext By Id (B) for the deferred fields.
    expect(
      t
        .calls()
        .map((r) => r.operation)
        .sort(),
    ).toEqual(['getHeadById', 'getHeadExtById']);
    expect(planOf(query, { id })).toMatchObject({ calls: 2, exact: true });
  });

  it('without @defer the same fields cost one read', async () => {
    const plain = `query($id: ID!) { head(id: $id) { name hair { name } headMetadata } }`;
    const response = await t.execute<any>(plain, { id: ids[0] });
    expect(response.data.head.headMetadata).toEqual(headA(ids[0]!).head_metadata);
    expect(t.calls().map((r) => r.operation)).toEqual(['getHeadExtById']);
  });

  it('deferred fields of listed heads come from one Get Heads Ext window beside the page', async () => {
    const listing = `{ heads(first: 5) { nodes { uuid name ... @defer { headMetadata hair { userId } } } } }`;
    t.reference.injectFault('listHeadsExt', { kind: 'latency', ms: 300 });
    const { parts: received } = await parts(listing, {});
    expect(received[0]!.body.data.heads.nodes.map((n: any) => n.uuid)).toEqual(ids.slice(0, 5));
    expect(received[0]!.at).toBeLessThan(t.calls('listHeadsExt')[0]!.endedAt!);
    const deferred = received.slice(1).flatMap((part) => part.body.incremental ?? []);
    // Each head's deferred fields arrive when they are ready, in any order.
    const byIndex = deferred.map((d: any) => [d.path, d.data.headMetadata]).sort((a: any, b: any) => a[0][2] - b[0][2]);
    expect(byIndex).toEqual(ids.slice(0, 5).map((id, i) => [['heads', 'nodes', i], headA(id).head_metadata]));
    expect(t.calls().map((r) => [r.operation, r.query])).toEqual([
      ['listHeads', { page: '1', size: '5' }],
      ['listHeadsExt', { limit: '6', skip: '0' }],
    ]);
    expect(planOf(listing)).toMatchObject({ calls: 2, exact: true });
  });

  it('over SSE (text/event-stream) as well', async () => {
    const id = ids[1]!;
    const { contentType, parts: received } = await parts(query, { id }, 'text/event-stream');
    expect(contentType).toMatch(/^text\/event-stream/);
    expect(received[0]!.body).toMatchObject({ data: { head: { name: headA(id).name } }, hasNext: true });
    expect(received.flatMap((part) => part.body.incremental ?? [])).toEqual([
      { data: { headMetadata: headA(id).head_metadata }, path: ['head'], label: 'meta' },
    ]);
  });
});

/** Apollo Client 4's GraphQL17Alpha9Handler asks with this (and Apollo Server 5.1 answers it). */
const alpha9 = 'multipart/mixed;incrementalSpec=v0.2, application/graphql-response+json, application/json';

describe('the graphql-js 17.0.0-alpha.9 format (multipart/mixed;incrementalSpec=v0.2)', () => {
  it('announces the deferred fragment as pending in the first part, then delivers it by id and completes it', async () => {
    const id = ids.find((i) => headA(i).hair)!;
    const query = `query($id: ID!) { head(id: $id) { __typename name ... @defer(label: "meta") { headMetadata } } }`;
    const { contentType, parts: received } = await parts(query, { id }, alpha9);
    expect(contentType).toMatch(/^multipart\/mixed/);
    expect(received.map((part) => part.body)).toEqual([
      {
        data: { head: { __typename: 'Head', name: headA(id).name } },
        pending: [{ id: '0', path: ['head'], label: 'meta' }],
        hasNext: true,
      },
      {
        incremental: [{ id: '0', data: { headMetadata: headA(id).head_metadata } }],
        completed: [{ id: '0' }],
        hasNext: false,
      },
    ]);
    expect(
      t
        .calls()
        .map((r) => r.operation)
        .sort(),
    ).toEqual(['getHeadById', 'getHeadExtById']);
  });

  it('one pending entry per listed head (a label, no label), each completed once its fields arrive', async () => {
    const listing = `{ heads(first: 3) { nodes { uuid ... @defer { headMetadata } } } }`;
    const { parts: received } = await parts(listing, {}, alpha9);
    const [first, ...rest] = received.map((part) => part.body);
    expect(first!.pending).toEqual([0, 1, 2].map((i) => ({ id: String(i), path: ['heads', 'nodes', i] })));
    const delivered = rest.flatMap((part) => part.incremental ?? []);
    const completed = rest.flatMap((part) => part.completed ?? []);
    expect(delivered.map((d: any) => [d.id, d.data.headMetadata]).sort()).toEqual(
      [0, 1, 2].map((i) => [String(i), headA(ids[i]!).head_metadata]).sort(),
    );
    expect(completed.map((c: any) => c.id).sort()).toEqual(['0', '1', '2']);
    expect(rest.flatMap((part) => part.pending ?? [])).toEqual([]);
    expect(rest.at(-1)!.hasNext).toBe(false);
  });

  it('announces a fragment deferred inside a deferred fragment in the part that delivers its parent', async () => {
    const id = ids.find((i) => headA(i).hair)!;
    const query = `query($id: ID!) { head(id: $id) { name ... @defer(label: "outer") { hair { name ... @defer(label: "inner") { userId } } } } }`;
    const { parts: received } = await parts(query, { id }, alpha9);
    const bodies = received.map((part) => part.body);
    expect(bodies[0]!.pending).toEqual([{ id: '0', path: ['head'], label: 'outer' }]);
    const announced = bodies.flatMap((b) => b.pending ?? []);
    expect(announced).toEqual([
      { id: '0', path: ['head'], label: 'outer' },
      { id: '1', path: ['head', 'hair'], label: 'inner' },
    ]);
    // Every id is delivered after (or with) its announcement, and completed.
    const order = bodies.flatMap((b, part) => [
      ...(b.pending ?? []).map((p: any) => ['pending', p.id, part]),
      ...(b.incremental ?? []).map((d: any) => ['data', d.id, part]),
    ]);
    for (const [, id, part] of order.filter(([kind]) => kind === 'data'))
      expect(order.find(([kind, other]) => kind === 'pending' && other === id)![2]).toBeLessThanOrEqual(part as number);
    expect(bodies.flatMap((b) => b.incremental ?? []).map((d: any) => [d.id, d.data])).toEqual([
      ['0', { hair: { name: headA(id).hair.name } }],
      ['1', { userId: expect.stringMatching(/^[0-9a-f-]{36}$/) }],
    ]);
    expect(bodies.flatMap((b) => b.completed ?? []).map((c: any) => c.id)).toEqual(['0', '1']);
  });

  it('a fragment on an interface without __typename is announced when it is delivered', async () => {
    const id = ids[0]!;
    const globalId = Buffer.from(`Head:${id}`).toString('base64');
    const query = `query($id: ID!) { node(id: $id) { id ... on Head @defer(label: "h") { name } } }`;
    const { parts: received } = await parts(query, { id: globalId }, alpha9);
    const bodies = received.map((part) => part.body);
    expect(bodies[0]).toEqual({ data: { node: { id: globalId } }, pending: [], hasNext: true });
    expect(bodies.slice(1)).toEqual([
      {
        pending: [{ id: '0', path: ['node'], label: 'h' }],
        incremental: [{ id: '0', data: { name: headA(id).name } }],
        completed: [{ id: '0' }],
        hasNext: false,
      },
    ]);
  });

  it('streams items by the id of the list, completing it when the answer ends', async () => {
    const query = `query($ids: [ID!]!) { nodes(ids: $ids) @stream(initialCount: 1) { ... on Head { uuid } } }`;
    const { parts: received } = await parts(query, { ids: ids.slice(0, 3) }, alpha9);
    const [first, ...rest] = received.map((part) => part.body);
    expect(first).toEqual({
      data: { nodes: [{ uuid: ids[0] }] },
      pending: [{ id: '0', path: ['nodes'] }],
      hasNext: true,
    });
    expect(rest.flatMap((b) => b.incremental ?? [])).toEqual([
      { id: '0', items: [{ uuid: ids[1] }] },
      { id: '0', items: [{ uuid: ids[2] }] },
    ]);
    expect(rest.flatMap((b) => b.completed ?? [])).toEqual([{ id: '0' }]);
    expect(rest.at(-1)!.completed).toEqual([{ id: '0' }]);
  });

  it("keeps the 2022-08-24 format for multipart/mixed without the parameter, with Apollo's deferSpec=20220824, and over SSE", async () => {
    const query = `query($id: ID!) { head(id: $id) { name ... @defer(label: "meta") { headMetadata } } }`;
    for (const accept of [
      'multipart/mixed',
      'multipart/mixed;deferSpec=20220824, application/json',
      'text/event-stream',
    ]) {
      const { parts: received } = await parts(query, { id: ids[2]! }, accept);
      expect(received[0]!.body.pending).toBeUndefined();
      expect(received.flatMap((part) => part.body.incremental ?? [])).toEqual([
        { data: { headMetadata: headA(ids[2]!).head_metadata }, path: ['head'], label: 'meta' },
      ]);
    }
  });
});

describe('validation of @defer and @stream', () => {
  it("refuses @defer on a mutation's root field and @stream on a field that is not a list, with the plugin's rules", async () => {
    const rootDefer = await t.execute(
      `mutation { ... @defer { login(input: { username: "demo", password: "x" }) { accessToken } } }`,
    );
    const streamOne = await t.execute(`query($id: ID!) { head(id: $id) @stream { name } }`, { id: ids[0] });
    expect(rootDefer.errors?.map((e) => [e.extensions?.code, e.message])).toEqual([
      ['GRAPHQL_VALIDATION_FAILED', 'Defer directive cannot be used on root mutation type "Mutation".'],
    ]);
    expect(streamOne.errors?.map((e) => [e.extensions?.code, e.message])).toEqual([
      ['GRAPHQL_VALIDATION_FAILED', 'Stream directive cannot be used on non-list field "head" on type "Query".'],
    ]);
    expect(t.calls()).toEqual([]);
  });

  it("validates a document that uses them with graphql-js's field-merging rule alone; the others get no extra rule", async () => {
    const seen: string[][] = [];
    const spy: Plugin = {
      onValidate: ({ params }) =>
        void seen.push(
          (params.rules ?? [])
            .filter(
              (rule: ValidationRule) =>
                rule.name.startsWith('Overlapping') ||
                rule === OverlappingFieldsCanBeMergedRule ||
                ['labelRule', 'rootFieldRule', 'streamOnListRule'].includes(rule.name),
            )
            .map((rule: ValidationRule) =>
              rule === OverlappingFieldsCanBeMergedRule ? 'graphql-js overlap' : rule.name,
            ),
        ),
    };
    const getEnveloped = envelop({
      plugins: [useEngine({ parse, validate, specifiedRules }), useSchema(schema), incrementalDeliveryRules, spy],
    });
    const check = (query: string) => {
      const enveloped = getEnveloped({});
      enveloped.validate(enveloped.schema, enveloped.parse(query));
    };
    check(`{ heads(first: 1) { nodes { name ... @defer { headMetadata } } } }`);
    check(`{ heads(first: 1) { nodes { name } } }`);
    expect(seen).toEqual([
      ['graphql-js overlap', 'labelRule', 'rootFieldRule', 'streamOnListRule'],
      ['graphql-js overlap'],
    ]);
  });
});

describe('@stream', () => {
  it('streams the items of nodes(ids:) after the first', async () => {
    const query = `query($ids: [ID!]!) { nodes(ids: $ids) @stream(initialCount: 1) { ... on Head { uuid } } }`;
    const { parts: received } = await parts(query, { ids: ids.slice(0, 3) });
    expect(received[0]!.body.data.nodes).toEqual([{ uuid: ids[0] }]);
    const streamed = received
      .slice(1)
      .flatMap((part) => part.body.incremental ?? [])
      .flatMap((d: any) => d.items);
    expect(streamed).toEqual([{ uuid: ids[1] }, { uuid: ids[2] }]);
    expect(t.calls()).toHaveLength(3);
  });

  it("refuses an initialCount below 0, written, in a variable or its default, as the client's mistake (BAD_USER_INPUT), with no upstream call", async () => {
    for (const [query, variables] of [
      ['{ heads(first: 2) { nodes @stream(initialCount: -1) { name } } }', {}],
      ['query($n: Int!) { heads(first: 2) { nodes @stream(initialCount: $n) { name } } }', { n: -3 }],
      ['query($n: Int = -2) { heads(first: 2) { nodes @stream(initialCount: $n) { name } } }', {}],
    ] as const) {
      const { parts: received } = await parts(query, variables);
      const errors = received.flatMap((part) => part.body.errors ?? []);
      expect(errors.map((e: { extensions?: { code?: string } }) => e.extensions?.code)).toEqual(['BAD_USER_INPUT']);
      expect(received.some((part) => part.body.data != null)).toBe(false);
    }
    expect(t.calls()).toEqual([]);
  });
});

describe('relay-compiler', () => {
  it('compiles a @defer fragment against schema.graphql', () => {
    const root = fileURLToPath(new URL('..', import.meta.url));
    const project = mkdtempSync(join(tmpdir(), 'relay-'));
    try {
      mkdirSync(join(project, 'src'));
      writeFileSync(
        join(project, 'src', 'HeadScreen.ts'),
        `import { graphql } from 'relay-runtime';
export const query = graphql\`query HeadScreenQuery($id: ID!) { head(id: $id) { name ...HeadScreen_metadata @defer } }\`;
export const fragment = graphql\`fragment HeadScreen_metadata on Head { headMetadata hair { userId } }\`;
`,
      );
      writeFileSync(
        join(project, 'relay.config.json'),
        JSON.stringify({
          src: './src',
          schema: join(root, 'schema.graphql'),
          language: 'typescript',
          eagerEsModules: true,
        }),
      );
      execFileSync(join(root, 'node_modules', '.bin', 'relay-compiler'), { cwd: project, stdio: 'pipe' });
      const generated = join(project, 'src', '__generated__');
      const artifact = readFileSync(join(generated, 'HeadScreenQuery.graphql.ts'), 'utf8');
      expect(readdirSync(generated).sort()).toEqual(['HeadScreenQuery.graphql.ts', 'HeadScreen_metadata.graphql.ts']);
      expect(artifact).toContain('"kind": "Defer"');
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });
});
