import { readFileSync } from 'node:fs';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { printedSchema, schemaFile } from '../scripts/print-schema.js';
import {
  DeleteHeadDocument,
  HeadsPageDocument,
  HeadsWithMetadataDocument,
  HeadWithHairDocument,
  LoginDocument,
  PermissionsDocument,
  UpdateHeadDocument,
  UpdateSubscriptionDocument,
} from '../src/generated/graphql.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import type { ReferenceUpstream } from '../src/reference-upstream/server.js';
import type { Gateway } from '../src/server/gateway.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The example operations of operations/*.graphql, run as a front-end would run them: the generated
 * TypedDocumentNode printed and POSTed to the gateway, which talks to the reference upstream on a
 * loopback port. Each test checks the typed result against the upstream's own data and counts the
 * upstream calls the operation cost, from the reference upstream's request recording.
 */

let t: TestGateway;
let reference: ReferenceUpstream;
let gateway: Gateway;

beforeAll(async () => {
  t = await startTestGateway();
  ({ reference, gateway } = t);
});

afterAll(() => t.close());

beforeEach(() => {
  reference.clearFaults();
  reference.resetRecording();
});

interface Result<TData> {
  data?: TData | null;
  errors?: { message: string; path?: (string | number)[]; extensions?: { code?: string } }[];
}

/** Runs a generated document through the gateway and returns the typed result. */
async function execute<TData, TVariables>(
  document: TypedDocumentNode<TData, TVariables>,
  variables: TVariables,
  headers: Record<string, string> = {},
): Promise<Result<TData>> {
  const response = await gateway.fetch('http://gateway/graphql', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify({ query: print(document), variables }),
  });
  return (await response.json()) as Result<TData>;
}

/** Like execute, but fails the test on any GraphQL error and returns the data. */
async function run<TData, TVariables>(
  document: TypedDocumentNode<TData, TVariables>,
  variables: TVariables,
  headers?: Record<string, string>,
): Promise<TData> {
  const result = await execute(document, variables, headers);
  expect(result.errors).toBeUndefined();
  expect(result.data).toBeTruthy();
  return result.data!;
}

/** The upstream operations recorded since the last reset, in arrival order. */
const upstreamCalls = () => reference.requests.map((r) => r.operation);
const globalHeadId = (uuid: string) => Buffer.from(`Head:${uuid}`).toString('base64');
const sameInstant = (a: string | null | undefined, b: string | null | undefined) =>
  expect(a == null ? a : Date.parse(a)).toBe(b == null ? b : Date.parse(b));

async function demoToken(): Promise<string> {
  const data = await run(LoginDocument, {
    input: { username: DEMO_CREDENTIALS.username, password: DEMO_CREDENTIALS.password },
  });
  reference.resetRecording();
  return data.login.accessToken;
}

/** The first head in listing order (skipping `skip` of them) that has a hair attached. */
function headWithHair(skip = 0) {
  const entry = reference.store
    .headIds()
    .map((id) => reference.store.findHead(id)!)
    .filter((e) => e.head.hair_id !== undefined)[skip];
  if (entry === undefined) throw new Error('the seed has no head with hair');
  return { head: entry.head, hair: reference.store.getHair(entry.head.hair_id!)! };
}

describe('schema.graphql', () => {
  it('equals the schema printed from src/schema (run `npm run schema` when this fails)', () => {
    // Names the first differing line rather than diffing two 500-line strings.
    const expected = printedSchema().split('\n');
    const found = readFileSync(schemaFile, 'utf8').split('\n');
    let line = 0;
    while (line < Math.max(expected.length, found.length) && expected[line] === found[line]) line++;
    const where =
      line === Math.max(expected.length, found.length)
        ? undefined
        : `line ${line + 1}: expected ${JSON.stringify(expected[line])}, found ${JSON.stringify(found[line])}`;
    expect(where, 'schema.graphql is stale: run `npm run schema`').toBeUndefined();
  });
});

describe('example operations', () => {
  it('HeadWithHair: a head and its hair in exactly 1 upstream call', async () => {
    const { head, hair } = headWithHair();
    const data = await run(HeadWithHairDocument, { id: head.id });
    expect(data.head).not.toBeNull();
    const got = data.head!;
    expect(got.id).toBe(globalHeadId(head.id));
    expect(got.uuid).toBe(head.id);
    expect(got.name).toBe(head.name);
    expect(new URL(got.url).href).toBe(new URL(head.url).href);
    sameInstant(got.createdAt, head.created_at);
    sameInstant(got.updatedAt, head.updated_at);
    expect(got.hair).toEqual({
      id: hair.id,
      name: hair.name,
      url: expect.any(String),
      style: hair.style.toUpperCase(),
      gender: hair.gender.toUpperCase(),
    });
    expect(new URL(got.hair!.url).href).toBe(new URL(hair.url).href);
    expect(upstreamCalls()).toEqual(['getHeadExt']);
  });

  it('HeadWithHair: the global ID works as well as the UUID', async () => {
    const { head } = headWithHair(1);
    const data = await run(HeadWithHairDocument, { id: globalHeadId(head.id) });
    expect(data.head?.uuid).toBe(head.id);
    expect(upstreamCalls()).toEqual(['getHeadExt']);
  });

  it('HeadsPage: first 10 in 1 upstream call, then the next page from endCursor', async () => {
    const ids = reference.store.headIds();
    const first = await run(HeadsPageDocument, { first: 10 });
    expect(first.heads.totalCount).toBe(reference.store.headCount);
    expect(first.heads.edges.map((e) => e.node.id)).toEqual(ids.slice(0, 10).map(globalHeadId));
    for (const { node } of first.heads.edges) {
      const seeded = reference.store.findHead(
        Buffer.from(node.id, 'base64').toString('utf8').slice('Head:'.length),
      )!.head;
      expect(node.name).toBe(seeded.name);
      expect(node.hair?.name ?? null).toBe(
        seeded.hair_id === undefined ? null : reference.store.getHair(seeded.hair_id)!.name,
      );
    }
    expect(first.heads.pageInfo.hasNextPage).toBe(true);
    expect(first.heads.pageInfo.endCursor).toBe(first.heads.edges.at(-1)!.cursor);
    expect(upstreamCalls()).toEqual(['listHeads']);

    reference.resetRecording();
    const second = await run(HeadsPageDocument, { first: 10, after: first.heads.pageInfo.endCursor });
    expect(second.heads.edges.map((e) => e.node.id)).toEqual(ids.slice(10, 20).map(globalHeadId));
    expect(upstreamCalls()).toEqual(['listHeads']);
  });

  it('HeadsPage: search filters by name, in 1 upstream call', async () => {
    const name = reference.store.findHead(reference.store.headIds()[0]!)!.head.name;
    const expected = reference.store.selectHeads({ search: name }).map((e) => e.head.name);
    const data = await run(HeadsPageDocument, { first: 10, search: name });
    expect(data.heads.totalCount).toBe(expected.length);
    expect(data.heads.edges.map((e) => e.node.name)).toEqual(expected.slice(0, 10));
    expect(upstreamCalls()).toEqual(['listHeads']);
  });

  it('HeadsWithMetadata: first 5 costs one Get Heads Ext call (the planner)', async () => {
    const ids = reference.store.headIds().slice(0, 5);
    const data = await run(HeadsWithMetadataDocument, { first: 5 });
    expect(data.heads.nodes.map((n) => n.id)).toEqual(ids.map(globalHeadId));
    for (const [i, node] of data.heads.nodes.entries()) {
      const seeded = reference.store.findHead(ids[i]!)!.head;
      expect(node.name).toBe(seeded.name);
      expect(node.headMetadata).toEqual(seeded.head_metadata);
    }
    expect(upstreamCalls()).toEqual(['listHeadsExt']);
    // One row more than the window tells whether more heads follow.
    expect(reference.requests[0]!.query).toEqual({ limit: '6', skip: '0' });
  });

  it('Login: returns a bearer token the upstream knows, in 1 upstream call', async () => {
    const data = await run(LoginDocument, {
      input: { username: DEMO_CREDENTIALS.username, password: DEMO_CREDENTIALS.password },
    });
    expect(data.login.tokenType).toBe('bearer');
    expect(reference.store.userForToken(data.login.accessToken)?.username).toBe(DEMO_CREDENTIALS.username);
    expect(upstreamCalls()).toEqual(['login']);
  });

  it('Login: wrong credentials give an error, not a token', async () => {
    const result = await execute(LoginDocument, {
      input: { username: DEMO_CREDENTIALS.username, password: 'not-the-password' },
    });
    expect(result.data ?? null).toBeNull();
    expect(result.errors?.map((e) => e.extensions?.code)).toEqual(['UNAUTHENTICATED']);
    expect(upstreamCalls()).toEqual(['login']);
  });

  it('Permissions: with the bearer token, 1 upstream call that carries it', async () => {
    const token = await demoToken();
    const data = await run(PermissionsDocument, { first: 5 }, { authorization: `Bearer ${token}` });
    expect(data.permissions.totalCount).toBe(reference.store.permissionCount);
    expect(data.permissions.nodes).toEqual(
      reference.store
        .permissions()
        .slice(0, 5)
        .map((p) => ({ id: p.id, role: p.role.toUpperCase() })),
    );
    expect(upstreamCalls()).toEqual(['getPermissions']);
    expect(reference.requests[0]!.headers.authorization).toBe(`Bearer ${token}`);
  });

  it('Permissions: without a token, UNAUTHENTICATED and no upstream call', async () => {
    const result = await execute(PermissionsDocument, { first: 5 });
    expect(result.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(upstreamCalls()).toEqual([]);
  });

  it('UpdateHead: renames the head upstream in 1 call; a later read sees the new name', async () => {
    const { head } = headWithHair(2);
    const name = `Renamed ${head.name}`.slice(0, 100);
    const data = await run(UpdateHeadDocument, { input: { id: head.id, name } });
    expect(data.updateHead.head.id).toBe(globalHeadId(head.id));
    expect(data.updateHead.head.name).toBe(name);
    const stored = reference.store.findHead(head.id)!.head;
    expect(stored.name).toBe(name);
    sameInstant(data.updateHead.head.updatedAt, stored.updated_at);
    expect(Date.parse(stored.updated_at)).toBeGreaterThan(Date.parse(head.updated_at));
    expect(upstreamCalls()).toEqual(['updateHead']);
    expect(reference.requests[0]!.body).toEqual({ name });

    reference.resetRecording();
    const reread = await run(HeadWithHairDocument, { id: head.id });
    expect(reread.head?.name).toBe(name);
    expect(upstreamCalls()).toEqual(['getHeadExt']);
  });

  it('UpdateSubscription: deactivates the caller’s organization subscription in 1 call', async () => {
    const token = await demoToken();
    const organizationId = reference.store.findUser(DEMO_CREDENTIALS.username)!.organization_id!;
    const data = await run(
      UpdateSubscriptionDocument,
      { input: { active: false } },
      { authorization: `Bearer ${token}` },
    );
    const stored = reference.store.subscriptionDto(reference.store.subscriptionForOrganization(organizationId)!) as {
      id: string;
      active: boolean;
      platform_type: string;
      subscription_type: { name: string; payment_cycle: number };
    };
    const cycles: Record<number, string> = {
      1: 'MONTHLY',
      2: 'BIMONTHLY',
      3: 'QUARTERLY',
      6: 'SEMIANNUAL',
      12: 'ANNUAL',
    };
    expect(stored.active).toBe(false);
    expect(data.updateSubscription.subscription).toEqual({
      id: stored.id,
      active: false,
      platformType: stored.platform_type.toUpperCase(),
      subscriptionType: {
        name: stored.subscription_type.name,
        paymentCycle: cycles[stored.subscription_type.payment_cycle],
      },
    });
    expect(upstreamCalls()).toEqual(['updateSubscription']);
    expect(reference.requests[0]!.body).toEqual({ active: false });
  });

  it('DeleteHead: with an admin token, deletes upstream in 1 call; the head is gone', async () => {
    const token = await demoToken();
    const id = reference.store.headIds().at(-1)!;
    const data = await run(
      DeleteHeadDocument,
      { input: { id: globalHeadId(id) } },
      { authorization: `Bearer ${token}` },
    );
    expect(data.deleteHead).toEqual({ deletedHeadId: globalHeadId(id), deletedHeadUuid: id });
    expect(reference.store.findHead(id)).toBeUndefined();
    expect(upstreamCalls()).toEqual(['deleteHead']);

    reference.resetRecording();
    const after = await execute(HeadWithHairDocument, { id });
    expect(after.data?.head ?? null).toBeNull();
    expect(after.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect(upstreamCalls()).toEqual(['getHeadExt']);
  });

  it('DeleteHead: without a token, UNAUTHENTICATED and no upstream call', async () => {
    const id = reference.store.headIds()[0]!;
    const result = await execute(DeleteHeadDocument, { input: { id } });
    expect(result.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(reference.store.findHead(id)).toBeDefined();
    expect(upstreamCalls()).toEqual([]);
  });
});
