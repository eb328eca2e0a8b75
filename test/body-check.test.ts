import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { z } from 'zod';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { checkBody } from '../src/upstream/body-check.js';
import {
  headAPageSchema,
  headASchema,
  headBListSchema,
  headBSchema,
  loginResponseSchema,
  permissionPageSchema,
} from '../src/upstream/schemas.js';

/*
 * The compiled body check must pass exactly the bodies zod passes, with the same data, and refuse
 * the others with zod's issues: real bodies from the reference upstream, changed at random places
 * into the values that tell validators apart (local timestamps, upper-case schemes, astral
 * characters at a length limit, integers at the Int bound, nulls, missing keys, wrong types).
 * 400 cases a body by default, with a fixed seed; BODY_CHECK_RUNS and BODY_CHECK_SEED change them.
 */

let reference: ReferenceUpstream;
const bodies: { name: string; schema: z.ZodType; body: unknown }[] = [];

beforeAll(async () => {
  reference = await startReferenceUpstream({ record: false });
  const get = async (path: string, headers: Record<string, string> = {}) =>
    (await fetch(`${reference.url}${path}`, { headers })).json();
  const login = await (
    await fetch(`${reference.url}/login`, {
      method: 'POST',
      body: new URLSearchParams({ ...DEMO_CREDENTIALS, grant_type: 'password' }),
    })
  ).json();
  const page = (await get('/heads?page=1&size=8')) as { items: { id: string }[] };
  const withHair = page.items.find((head) => (head as { hair?: unknown }).hair)!;
  bodies.push(
    { name: 'Get Heads page', schema: headAPageSchema, body: page },
    { name: 'Get Head Ext', schema: headASchema, body: await get(`/heads/${withHair.id}/ext`) },
    { name: 'Get Heads Ext', schema: headBListSchema, body: await get('/heads/ext?limit=6&skip=0') },
    { name: 'Get Head Ext By Id', schema: headBSchema, body: await get(`/head/${withHair.id}/ext`) },
    {
      name: 'Get Permissions page',
      schema: permissionPageSchema,
      body: await get('/permissions?page=1&size=6', { authorization: `Bearer ${login.access_token}` }),
    },
    { name: 'Login', schema: loginResponseSchema, body: login },
  );
});

afterAll(() => reference.close());

/** Values on which a JSON Schema validator and zod could disagree. */
const telling = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    '',
    'HTTPS://CDN.EXAMPLE.TEST/a.glb',
    'https://cdn.example.test/a b',
    'javascript:alert(1)',
    '2024-01-01T10:00',
    '2024-01-01T10:00:00.5',
    '2024-01-01T10:00:00+01:00',
    '2024-01-01T10:00:00z',
    '2024-02-30T00:00:00Z',
    '2024-01-01 10:00:00Z',
    'a1b2c3d4-0000-4000-8000-00000000000G',
    'A1B2C3D4-0000-4000-8000-000000000001',
    'x'.repeat(100),
    'x'.repeat(101),
    '😀'.repeat(50),
    '😀'.repeat(51),
    0,
    -1,
    1.5,
    2 ** 31 - 1,
    2 ** 31,
    true,
    [],
    {},
    [{}],
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

/** Rewrites of a string already in the body: its scheme in capitals, its offset dropped, one character past a limit. */
const rewrites = {
  upper: (text: string) => text.toUpperCase(),
  local: (text: string) => text.replace(/(?:Z|[+-]\d\d:\d\d)$/, ''),
  astral: (text: string) => `${text}😀`,
};

type Change = { at: number; remove: boolean; value: unknown; rewrite: keyof typeof rewrites | undefined };
const change = fc.record({
  at: fc.nat(),
  remove: fc.boolean(),
  value: telling,
  rewrite: fc.constantFrom(undefined, ...(Object.keys(rewrites) as (keyof typeof rewrites)[])),
});

/** Every place in a body a change can land: each object property and array item, at any depth. */
function places(value: unknown, into: { parent: Record<string | number, unknown>; key: string | number }[] = []) {
  if (typeof value === 'object' && value !== null) {
    for (const key of Object.keys(value)) {
      const parent = value as Record<string, unknown>;
      into.push({ parent, key: Array.isArray(value) ? Number(key) : key });
      places(parent[key], into);
    }
  }
  return into;
}

function changed(body: unknown, changes: Change[]): unknown {
  let copy = structuredClone(body);
  for (const { at, remove, value, rewrite } of changes) {
    const all = places(copy);
    const place = all[at % (all.length + 1)];
    if (place === undefined) {
      copy = structuredClone(value); // the whole body
      continue;
    }
    const current = place.parent[place.key];
    if (rewrite !== undefined && typeof current === 'string') place.parent[place.key] = rewrites[rewrite](current);
    else if (remove && !Array.isArray(place.parent)) delete place.parent[place.key];
    else place.parent[place.key] = structuredClone(value);
  }
  return copy;
}

describe('the compiled body check', () => {
  it('passes what zod passes with the same data, and refuses what zod refuses with zod’s issues', () => {
    const seen = { passedFast: 0, passedByZod: 0, refused: 0 };
    for (const { name, schema, body } of bodies) {
      const zodParse = vi.spyOn(schema, 'safeParse');
      fc.assert(
        fc.property(fc.array(change, { minLength: 0, maxLength: 3 }), (changes) => {
          const input = changed(body, changes);
          const byZod = schema.safeParse(structuredClone(input));
          zodParse.mockClear();
          const checked = checkBody(schema, structuredClone(input));
          expect({ body: name, success: checked.success }).toEqual({ body: name, success: byZod.success });
          if (checked.success) {
            // zod drops keys the contract does not name; the check leaves them, and readers never look.
            expect(checked.data).toMatchObject(byZod.data as object);
            if (zodParse.mock.calls.length === 0) seen.passedFast++;
            else seen.passedByZod++;
          } else {
            expect(checked.error.issues).toEqual(byZod.error!.issues);
            seen.refused++;
          }
        }),
        { numRuns: Number(process.env.BODY_CHECK_RUNS ?? 400), seed: Number(process.env.BODY_CHECK_SEED ?? 20261122) },
      );
      zodParse.mockRestore();
    }
    // Each way through was taken: fast, refused, and passed by zod after the compiled check refused (an upper-case
    // scheme).
    expect(seen.passedFast).toBeGreaterThan(100);
    expect(seen.passedByZod).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(100);
  });

  it('gives a timestamp without an offset a Z only when the whole body passes', () => {
    const body = structuredClone(bodies[0]!.body) as { items: Record<string, any>[] };
    body.items[0]!.created_at = '2024-01-01T10:00:00';
    body.items[0]!.hair = { ...body.items[1]!.hair, created_at: '2024-01-01T10:00:00.5' };
    const refused = structuredClone(body);
    refused.items[1]!.url = 'ftp://cdn.example.test/a.glb';
    const refusal = checkBody(headAPageSchema, refused);
    expect(refusal.success).toBe(false);
    expect(refusal.error!.issues.map((issue) => issue.path)).toEqual([['items', 1, 'url']]);
    expect(refused.items[0]!.created_at).toBe('2024-01-01T10:00:00');

    const passed = checkBody(headAPageSchema, body);
    expect(passed.success).toBe(true);
    expect([passed.data!.items[0]!.created_at, passed.data!.items[0]!.hair!.created_at]).toEqual([
      '2024-01-01T10:00:00Z',
      '2024-01-01T10:00:00.5Z',
    ]);
  });
});
