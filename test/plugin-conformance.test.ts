import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { useAPQ } from '@graphql-yoga/plugin-apq';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { useDeferStream } from '@graphql-yoga/plugin-defer-stream';
import { defaultExtractPersistedOperationId, usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import { createGraphQLError, createYoga, type Plugin } from 'graphql-yoga';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../src/schema/index.js';
import { csrfHeaders } from '../src/server/guards/operation-limits.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * What yoga's plugins decided before the gateway owned the code (server/documents/
 * persisted-documents.ts, guards/operation-limits.ts' CSRF check, documents/incremental-delivery.ts'
 * rules): the same table of requests sent to a plain `createYoga` with the plugin, over the
 * gateway's own schema, and to the gateway, both on real ports; their status, error codes,
 * messages and data compared, and what each left in its APQ store. Where the gateway answers
 * otherwise on purpose, the row says what and why.
 */

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const TYPENAME = '{ __typename }';
const KNOWN = 'query Known { __typename }';

interface Seen {
  readonly status: number;
  readonly data: unknown;
  readonly errors: { code: unknown; message: string }[];
}

async function send(
  url: string,
  init: { method?: string; query?: string; body?: object; headers?: Record<string, string> },
): Promise<Seen> {
  const target = init.method === 'GET' ? `${url}?query=${encodeURIComponent(init.query!)}` : url;
  const headers =
    init.method === 'GET' ? (init.headers ?? {}) : { 'content-type': 'application/json', ...init.headers };
  const response = await fetch(target, {
    method: init.method ?? 'POST',
    headers: { accept: 'application/graphql-response+json, application/json', ...headers },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const body = (await response.json().catch(() => ({}))) as {
    data?: unknown;
    errors?: { message: string; extensions?: { code?: unknown } }[];
  };
  return {
    status: response.status,
    data: body.data,
    errors: (body.errors ?? []).map((error) => ({ code: error.extensions?.code, message: error.message })),
  };
}

/** A plain yoga over the gateway's schema with `plugins`, on a real port: its /graphql. */
async function plainYoga(plugins: Plugin[]): Promise<{ url: string; close: () => Promise<void> }> {
  const yoga = createYoga({ schema, plugins, maskedErrors: false, graphiql: false });
  const { createServer } = await import('node:http');
  const server = createServer(yoga);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** A row: the request, and what the gateway answers otherwise on purpose (else: the same as yoga). */
interface Row {
  readonly name: string;
  readonly request: Parameters<typeof send>[1];
  readonly differs?: {
    readonly gateway: Partial<Seen> & { codes?: unknown[] };
    readonly yoga: Partial<Seen> & { codes?: unknown[] };
    readonly why: string;
  };
}

/** Both answers, compared: the same, or each as the row says. */
function compare(row: Row, yoga: Seen, gateway: Seen): void {
  if (row.differs === undefined) return void expect(gateway, row.name).toEqual(yoga);
  for (const [side, seen] of [
    ['gateway', gateway],
    ['yoga', yoga],
  ] as const) {
    const { codes, ...rest } = row.differs[side];
    expect(seen, `${row.name} (${side}; ${row.differs.why})`).toMatchObject(rest);
    if (codes !== undefined)
      expect(
        seen.errors.map((error) => error.code),
        `${row.name} (${side})`,
      ).toEqual(codes);
  }
}

describe('APQ and CSRF, as @graphql-yoga/plugin-apq 3.6.2 and plugin-csrf-prevention 3.24.1 answer them (CSRF_PREVENTION=true)', () => {
  let t: TestGateway;
  let gateway: string;
  let yoga: Awaited<ReturnType<typeof plainYoga>>;
  const yogaStore = new Map<string, string>();
  beforeAll(async () => {
    t = await startTestGateway({ env: { CSRF_PREVENTION: 'true' } });
    gateway = await t.listen();
    yoga = await plainYoga([
      useCSRFPrevention({ requestHeaders: [...csrfHeaders] }),
      useAPQ({
        store: { get: (hash) => yogaStore.get(hash), set: (hash, query) => void yogaStore.set(hash, query) },
        responseConfig: { forceStatusCodeOk: true },
      }),
      useDeferStream(),
    ]);
  });
  afterAll(async () => {
    await yoga.close();
    await t.close();
  });

  const apq = (query: string | undefined, hash: string, version = 1) => ({
    ...(query === undefined ? {} : { query }),
    extensions: { persistedQuery: { version, sha256Hash: hash } },
  });
  const csrfRefused = { status: 403, codes: ['BAD_REQUEST'] };
  const rows: Row[] = [
    {
      name: 'a hash never registered',
      request: { body: apq(undefined, sha256('{ __typename __schema { queryType { name } } }')) },
    },
    { name: 'a hash with its text: run (and registered)', request: { body: apq(TYPENAME, sha256(TYPENAME)) } },
    { name: 'that hash alone, after', request: { body: apq(undefined, sha256(TYPENAME)) } },
    {
      name: 'a hash that is not its text’s',
      request: { body: apq(TYPENAME, sha256('something else')) },
      differs: {
        yoga: { status: 200, codes: ['PERSISTED_QUERY_MISMATCH'] },
        gateway: { status: 400, codes: ['BAD_USER_INPUT'] },
        why: 'a client’s mistake is a 400 with the input code; the Apollo links do not retry on it',
      },
    },
    { name: 'an extension of another version: a plain query', request: { body: apq(TYPENAME, 'not a hash', 2) } },
    { name: 'a hash with a text that does not validate', request: { body: apq('{ nope }', sha256('{ nope }')) } },
    {
      name: 'a GET with no CSRF header',
      request: { method: 'GET', query: TYPENAME },
      differs: {
        yoga: { status: 403, codes: [undefined] },
        gateway: csrfRefused,
        why: 'the refusal has a code and names the headers that pass',
      },
    },
    { name: 'a GET with one', request: { method: 'GET', query: TYPENAME, headers: { 'x-graphql-yoga-csrf': '1' } } },
    {
      name: 'a GET with Apollo’s',
      request: { method: 'GET', query: TYPENAME, headers: { 'apollo-require-preflight': 'true' } },
    },
    {
      name: 'a form-typed POST with none',
      request: { body: { query: TYPENAME }, headers: { 'content-type': 'text/plain' } },
      differs: { yoga: { status: 403, codes: [undefined] }, gateway: csrfRefused, why: 'as above' },
    },
    { name: 'a JSON POST', request: { body: { query: TYPENAME } } },
  ];

  it.each(rows.map((row) => [row.name, row] as const))('%s', async (_name, row) => {
    compare(row, await send(yoga.url, row.request), await send(gateway, row.request));
  });

  it('keeps what yoga keeps in its store, but never a document that does not validate', async () => {
    for (const row of rows) {
      await send(yoga.url, row.request);
      await send(gateway, row.request);
    }
    const registered = async (hash: string) =>
      (await send(gateway, { body: apq(undefined, hash) })).errors.length === 0;
    expect(yogaStore.has(sha256(TYPENAME))).toBe(true);
    expect(await registered(sha256(TYPENAME))).toBe(true);
    // yoga stores the text before it validates; the gateway stores only what validated.
    expect(yogaStore.has(sha256('{ nope }'))).toBe(true);
    expect(
      (await send(gateway, { body: apq(undefined, sha256('{ nope }')) })).errors.map((error) => error.code),
    ).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
  });

  it.each([
    [
      'a label that is not a static string',
      'query($l: String) { heads(first: 1) { nodes { ... @defer(label: $l) { name } } } }',
    ],
    [
      'one label twice',
      '{ heads(first: 1) { nodes { ... @defer(label: "a") { name } ... @defer(label: "a") { url } } } }',
    ],
    [
      '@defer on a root mutation field',
      'mutation { ... @defer { login(input: { username: "x", password: "y" }) { accessToken } } }',
    ],
    ['@stream on a field that is no list', '{ heads(first: 1) @stream { totalCount } }'],
  ])('@defer and @stream, as plugin-defer-stream 3.24.1 validates them: %s', async (_name, query) => {
    const [fromYoga, fromGateway] = [
      await send(yoga.url, { body: { query } }),
      await send(gateway, { body: { query } }),
    ];
    expect(fromGateway.errors.map((error) => error.message)).toEqual(fromYoga.errors.map((error) => error.message));
    expect(fromGateway.errors.length).toBeGreaterThan(0);
  });
});

describe('trusted documents only, as @graphql-yoga/plugin-persisted-operations 3.24.1 answers them (TRUSTED_DOCUMENTS_ONLY=true)', () => {
  let t: TestGateway;
  let gateway: string;
  let yoga: Awaited<ReturnType<typeof plainYoga>>;
  const id = `sha256:${sha256(KNOWN)}`;
  const trustedOnly = () =>
    createGraphQLError(
      'Only trusted documents run here: send the id of a document in the manifest (extensions.persistedQuery.sha256Hash or documentId), not a query.',
      {
        extensions: { code: 'PERSISTED_QUERY_ONLY', http: { status: 400 } },
      },
    );
  beforeAll(async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'manifest-')), 'manifest.json');
    writeFileSync(file, JSON.stringify({ [id]: KNOWN }));
    t = await startTestGateway({ env: { TRUSTED_DOCUMENTS_FILE: file, TRUSTED_DOCUMENTS_ONLY: 'true' } });
    gateway = await t.listen();
    const manifest = new Map([
      [id, KNOWN],
      [sha256(KNOWN), KNOWN],
    ]);
    yoga = await plainYoga([
      usePersistedOperations({
        allowArbitraryOperations: false,
        extractPersistedOperationId: (params, request, context) =>
          typeof (params as { documentId?: unknown }).documentId === 'string'
            ? (params as { documentId: string }).documentId
            : defaultExtractPersistedOperationId(params, request, context),
        getPersistedOperation: (key) => manifest.get(key) ?? null,
        customErrors: { notFound: trustedOnly, keyNotFound: trustedOnly, persistedQueryOnly: trustedOnly },
      }),
    ]);
  });
  afterAll(async () => {
    await yoga.close();
    await t.close();
  });

  const rows: Row[] = [
    { name: 'a known documentId', request: { body: { documentId: id } } },
    {
      name: 'its hash as APQ sends it',
      request: { body: { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(KNOWN) } } } },
    },
    { name: 'an unknown id', request: { body: { documentId: `sha256:${sha256('{ other }')}` } } },
    { name: 'a query text', request: { body: { query: KNOWN } } },
    { name: 'a query text beside a known id', request: { body: { query: KNOWN, documentId: id } } },
    { name: 'neither', request: { body: { operationName: 'Known' } } },
  ];

  it.each(rows.map((row) => [row.name, row] as const))('%s', async (_name, row) => {
    compare(row, await send(yoga.url, row.request), await send(gateway, row.request));
  });
});
