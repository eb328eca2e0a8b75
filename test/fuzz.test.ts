import fc from 'fast-check';
import {
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLNamedType,
  type GraphQLObjectType,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  isUnionType,
} from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { OperationName } from '../src/domain/operations.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { HeadShape } from '../src/reference-upstream/store.js';
import { schema } from '../src/schema/index.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * Property tests of the gateway's edges, bounded to a few seconds:
 * - random operation documents generated from the schema (real fields and arguments, invalid
 *   values among them, aliases, fragments, directives, variables), garbage text, and raw HTTP
 *   requests with random methods, content types and bodies;
 * - random and near-valid off-contract upstream answers behind valid operations.
 * Whatever comes in, the gateway never answers 5xx, never leaks an internal error (only the
 * masked "Unexpected error."), a stack frame, the caller's token or the upstream's address.
 *
 * The seed is fixed so a run is reproducible (fast-check prints seed and path of a failure);
 * FUZZ_SEED / FUZZ_RUNS override it and the runs per property for a longer local session.
 */

const SEED = Number(process.env.FUZZ_SEED ?? 20_261_121);
const RUNS = Number(process.env.FUZZ_RUNS ?? 0);
const runs = (n: number) => (RUNS > 0 ? RUNS : n);

let t: TestGateway;
let token: string;
let upstreamHost: string;
let ids: string[];

beforeAll(async () => {
  t = await startTestGateway();
  const login = await t.execute<{ login: { accessToken: string } }>(
    'mutation($input: LoginInput!) { login(input: $input) { accessToken } }',
    {
      input: DEMO_CREDENTIALS,
    },
  );
  token = login.data!.login.accessToken;
  upstreamHost = new URL(t.reference.url).host;
  ids = t.reference.store.headIds();
});

afterAll(() => t.close());

beforeEach(() => t.reset());

// ---- the invariants every answer must keep ----

interface Answer {
  readonly status: number;
  readonly text: string;
  readonly json: unknown;
}

async function send(request: Request): Promise<Answer> {
  const response = await t.gateway.fetch(request);
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json };
}

type WireError = { message?: unknown; extensions?: { code?: unknown } };

function errorsOf(json: unknown): WireError[] {
  if (typeof json !== 'object' || json === null) return [];
  const errors = (json as { errors?: unknown }).errors;
  return Array.isArray(errors) ? (errors as WireError[]) : [];
}

/** An object with a `data` entry, or without one but with at least one error. */
function isGraphQLResponse(json: unknown): boolean {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return false;
  return 'data' in json || errorsOf(json).length > 0;
}

/** No 5xx, no unmasked internal error, no stack frame, no token, no upstream address. */
function expectSafe(answer: Answer, context: string): void {
  const where = `${context}\n→ ${answer.status} ${answer.text.slice(0, 600)}`;
  expect(answer.status, where).toBeLessThan(500);
  expect(answer.text.includes(token), `token leaked: ${where}`).toBe(false);
  expect(answer.text.includes(upstreamHost), `upstream address leaked: ${where}`).toBe(false);
  // A stack frame: "    at fn (file:line:col)" or "    at file:line:col" (GraphiQL's HTML has "at" in prose).
  expect(/^\s*at .*:\d+:\d+\)?$/m.test(answer.text), `stack frame: ${where}`).toBe(false);
  for (const error of errorsOf(answer.json)) {
    expect(JSON.stringify(error).includes('    at '), `stack frame in an error: ${where}`).toBe(false);
    if (error.extensions?.code === 'INTERNAL_SERVER_ERROR')
      expect(error.message, `unmasked internal error: ${where}`).toBe('Unexpected error.');
  }
}

/**
 * Whatever a client sends is its own mistake at worst: never an internal error (the upstream here always answers well).
 */
function expectNotOurFault(answer: Answer, context: string): void {
  for (const error of errorsOf(answer.json))
    expect(error.extensions?.code, `${context}\n→ ${answer.status} ${answer.text.slice(0, 600)}`).not.toBe(
      'INTERNAL_SERVER_ERROR',
    );
}

/** Behind a valid operation: data, or errors that each say what went wrong with a code. */
function expectDataOrCodedErrors(answer: Answer, context: string): void {
  const where = `${context}\n→ ${answer.status} ${answer.text.slice(0, 600)}`;
  expect(answer.status, where).toBe(200);
  expect(
    typeof answer.json === 'object' && answer.json !== null && 'data' in answer.json,
    `no data key: ${where}`,
  ).toBe(true);
  for (const error of errorsOf(answer.json)) {
    expect(typeof error.extensions?.code, `uncoded error: ${where}`).toBe('string');
    expect(error.extensions?.code, `internal error: ${where}`).not.toBe('INTERNAL_SERVER_ERROR');
  }
}

const graphqlPost = (body: string, headers: Record<string, string> = {}) =>
  new Request('http://gateway/graphql', {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      ...headers,
    },
    body,
  });

// ---- documents generated from the schema ----

type Gen = fc.GeneratorValue;

const pick = <T>(g: Gen, items: readonly T[]): T => items[g(fc.nat, { max: items.length - 1 })]!;
const chance = (g: Gen, percent: number): boolean => g(fc.nat, { max: 99 }) < percent;
const someString = (g: Gen): string =>
  g(fc.string, { maxLength: 40, unit: pick(g, ['grapheme', 'binary', 'grapheme-ascii'] as const) });
/** A GraphQL string literal; JSON's escapes are GraphQL's (lone surrogates may not parse: fine). */
const stringLiteral = (value: string) => JSON.stringify(value);

/** Names safe for aliases, fragments, variables, input object keys. */
const nameArb = () => fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/);

class DocumentBuilder {
  readonly fragments: string[] = [];
  readonly variableDefinitions: string[] = [];
  readonly variables: Record<string, unknown> = {};

  /**
   * How hostile this document is: 0 keeps to the schema (values still random, so some are
   * refused as input), higher values add invalid literals, unknown fields, bad fragments and
   * undeclared variables in proportion. Half the documents are drawn at 0, so a fair share
   * reaches execution and the upstream.
   */
  readonly bad: number;
  private aliases = 0;

  constructor(private readonly g: Gen) {
    this.bad = pick(g, [0, 0, 1, 3]);
  }

  /** A deliberate mistake, `percent` times in a hundred per unit of hostility. */
  private mistake(percent: number): boolean {
    return this.bad > 0 && chance(this.g, percent * this.bad);
  }

  idValue(): unknown {
    const g = this.g;
    const id = pick(g, ids);
    if (this.mistake(15) || chance(g, 10)) {
      return pick(g, [
        `${id}/../../permissions`,
        '',
        someString(g),
        Buffer.from(someString(g)).toString('base64'),
        Buffer.from(`Head:${someString(g)}`).toString('base64'),
      ]);
    }
    return pick(g, [
      id,
      Buffer.from(`Head:${id}`).toString('base64'),
      Buffer.from(`Permission:${id}`).toString('base64'),
      '00000000-0000-4000-8000-000000000000',
      id.toUpperCase(),
    ]);
  }

  /** Values for arguments whose name says more than their type (paging). */
  private byName(name: string | undefined): unknown {
    const g = this.g;
    if ((name === 'first' || name === 'last') && !this.mistake(20) && chance(g, 90))
      return g(fc.integer, { min: 1, max: 100 });
    if ((name === 'after' || name === 'before') && !this.mistake(20) && chance(g, 85)) {
      // The relay cursor format, valid or just past the end, or forged (huge, negative, not an integer); garbage
      // otherwise.
      const offset = chance(g, 80) ? g(fc.integer, { min: -1, max: 300 }) : pick(g, forgedOffsets);
      return Buffer.from(`OffsetConnection:${offset}`).toString('base64');
    }
    return undefined;
  }

  /** A JSON value fitting the input type most of the time, for variables. */
  jsonFor(type: GraphQLInputType, depth = 0, name?: string, nonNull = false): unknown {
    const g = this.g;
    if (this.mistake(2)) return g(fc.jsonValue, { maxDepth: 2 });
    if (isNonNullType(type)) return this.jsonFor(type.ofType, depth, name, true);
    if (!nonNull && chance(g, 3)) return null;
    const named = this.byName(name);
    if (named !== undefined) return named;
    if (isListType(type))
      return Array.from({ length: g(fc.nat, { max: 4 }) }, () => this.jsonFor(type.ofType, depth + 1));
    if (isEnumType(type)) return this.mistake(5) ? someString(g) : pick(g, type.getValues()).name;
    if (isInputObjectType(type)) {
      const fields = Object.values(type.getFields());
      const value: Record<string, unknown> = {};
      for (const field of fields)
        if (isNonNullType(field.type) ? !this.mistake(5) : chance(g, 50))
          value[field.name] = this.jsonFor(field.type, depth + 1);
      if (this.mistake(2)) value[g(nameArb)] = g(fc.jsonValue, { maxDepth: 1 });
      return value;
    }
    switch (type.name) {
      case 'ID':
        return this.idValue();
      case 'Int':
        if (this.mistake(10)) return pick(g, [2 ** 31, -(2 ** 31) - 1, 1.5, '10']);
        return pick(g, [g(fc.integer, { min: -5, max: 120 }), g(fc.integer, { min: 1, max: 10 }), g(fc.integer)]);
      case 'Float':
        return this.mistake(10) ? '1' : pick(g, [g(fc.double, { noNaN: true, noDefaultInfinity: true }), 0, -1]);
      case 'Boolean':
        return this.mistake(10) ? pick(g, ['true', 0]) : g(fc.boolean);
      case 'UUID':
        return pick(g, [pick(g, ids), g(fc.uuid), someString(g)]);
      case 'JSON':
        return chance(g, 85) ? g(fc.jsonValue, { maxDepth: 3 }) : hostileJson(g);
      default:
        return someString(g);
    }
  }

  /** A GraphQL literal for the input type: fitting mostly, invalid some of the time. */
  literal(type: GraphQLInputType, depth = 0, name?: string, nonNull = false): string {
    const g = this.g;
    if (isNonNullType(type)) return this.mistake(2) ? 'null' : this.literal(type.ofType, depth, name, true);
    if (this.mistake(3)) return pick(g, ['null', '42', '"wrong"', 'true', '[]', '{}', 'NOT_AN_ENUM', '$undeclared']);
    if (isListType(type)) {
      if (chance(g, 30)) return this.literal(type.ofType, depth + 1);
      return `[${Array.from({ length: g(fc.nat, { max: 4 }) }, () => this.literal(type.ofType, depth + 1)).join(', ')}]`;
    }
    if (isEnumType(type)) return this.mistake(5) ? g(nameArb) : pick(g, type.getValues()).name;
    if (isInputObjectType(type)) {
      const parts: string[] = [];
      for (const field of Object.values(type.getFields())) {
        if (isNonNullType(field.type) ? !this.mistake(5) : chance(g, 45))
          parts.push(`${field.name}: ${this.literal(field.type, depth + 1)}`);
      }
      if (this.mistake(2)) parts.push(`${g(nameArb)}: 1`);
      return `{ ${parts.join(', ')} }`;
    }
    if (isScalarType(type) && type.name === 'JSON')
      return chance(g, 85) ? jsonLiteral(g(fc.jsonValue, { maxDepth: 3 })) : hostileJsonLiteral(g);
    const value = this.jsonFor(type, depth, name, nonNull);
    return typeof value === 'string' ? stringLiteral(value) : jsonLiteral(value);
  }

  argument(name: string, type: GraphQLInputType): string {
    const g = this.g;
    if (chance(g, 30)) {
      const variable = `v${this.variableDefinitions.length}`;
      // Sometimes declared with a type other than the argument's: a validation error to answer.
      const declared = this.mistake(3)
        ? pick(g, ['Int', 'String!', '[ID]', 'Boolean', 'UpdateHeadInput'])
        : String(type);
      this.variableDefinitions.push(`$${variable}: ${declared}`);
      if (!this.mistake(3)) this.variables[variable] = this.jsonFor(type, 0, name);
      return `${name}: $${variable}`;
    }
    return `${name}: ${this.literal(type, 0, name)}`;
  }

  field(field: GraphQLField<unknown, unknown>, depth: number): string {
    const g = this.g;
    // Unique aliases, except by mistake: a reused response name with other arguments is a conflict.
    let text = chance(g, 20) ? `${this.mistake(10) ? g(nameArb) : `a${this.aliases++}`}: ${field.name}` : field.name;
    const args = field.args.filter((arg) => (isNonNullType(arg.type) ? !this.mistake(3) : chance(g, 40)));
    if (args.length > 0) text += `(${args.map((arg) => this.argument(arg.name, arg.type)).join(', ')})`;
    if (chance(g, 5))
      text += ` @${pick(g, ['include', 'skip'])}(if: ${this.mistake(20) ? '1' : pick(g, ['true', 'false'])})`;
    const named = getNamedType(field.type);
    if (isObjectType(named) || isInterfaceType(named) || isUnionType(named)) {
      if (this.mistake(1)) return text; // a composite without a selection: refused by validation
      text += ` ${this.selection(named, depth + 1)}`;
    } else if (this.mistake(1)) {
      text += ' { id }'; // a selection on a leaf: refused by validation
    }
    return text;
  }

  selection(type: GraphQLNamedType, depth: number): string {
    const g = this.g;
    if (depth > 5 || (!isObjectType(type) && !isInterfaceType(type))) return '{ __typename }';
    const fields = Object.values(type.getFields());
    const parts: string[] = [];
    // Distinct fields, except by mistake: the same field twice with other arguments is a conflict.
    const chosen = this.mistake(10)
      ? Array.from({ length: g(fc.integer, { min: 1, max: 5 }) }, () => pick(g, fields))
      : g(fc.shuffledSubarray, [...fields.keys()], { minLength: 1, maxLength: Math.min(5, fields.length) }).map(
          (i) => fields[i]!,
        );
    for (const field of chosen) parts.push(this.field(field, depth));
    if (chance(g, 10)) parts.push('__typename');
    // `__typename` under aliases: they count against MAX_ALIASES like any other.
    if (chance(g, 3))
      parts.push(...Array.from({ length: g(fc.integer, { min: 1, max: 40 }) }, () => `t${this.aliases++}: __typename`));
    if (this.mistake(2)) parts.push(pick(g, ['doesNotExist', 'token', 'password', '__schema { types { name } }']));
    if (isInterfaceType(type) || chance(g, 10)) {
      const possible: readonly GraphQLObjectType[] = isInterfaceType(type)
        ? schema.getPossibleTypes(type)
        : [type as GraphQLObjectType];
      const target = this.mistake(2)
        ? (schema.getType(pick(g, ['Permission', 'Hair', 'Query'])) as GraphQLObjectType)
        : pick(g, possible);
      const inner = this.selection(target, depth + 1);
      if (chance(g, 50)) {
        parts.push(`... on ${target.name} ${inner}`);
      } else {
        const name = `F${this.fragments.length}`;
        this.fragments.push(`fragment ${name} on ${target.name} ${inner}`);
        parts.push(`...${name}`);
      }
    }
    return `{ ${parts.join(' ')} }`;
  }

  document(): { query: string; variables: Record<string, unknown> } {
    const g = this.g;
    const root: GraphQLObjectType = chance(g, 80)
      ? schema.getQueryType()!
      : (schema.getMutationType() ?? schema.getQueryType()!);
    const fields = Object.values(root.getFields());
    // Root fields under unique aliases (same field, other arguments), except by mistake.
    const selections = Array.from({ length: g(fc.integer, { min: 1, max: 4 }) }, (_, i) => {
      const field = this.field(pick(g, fields), 1);
      return i === 0 || this.mistake(10) || /^\w+: /.test(field) ? field : `r${i}: ${field}`;
    });
    const keyword = root === schema.getQueryType() ? 'query' : 'mutation';
    const name = chance(g, 30) ? ` ${g(nameArb)}` : '';
    const definitions = this.variableDefinitions.length > 0 ? `(${this.variableDefinitions.join(', ')})` : '';
    const operation = `${keyword}${name}${definitions} { ${selections.join(' ')} }`;
    return { query: [operation, ...this.fragments].join('\n'), variables: this.variables };
  }
}

/** Cursor offsets that were forged against the gateway: past 2^31-1, past 2^53, not integers, not plain. */
const forgedOffsets = [
  2 ** 31 - 1,
  2 ** 31,
  2 ** 53 - 1,
  1e14,
  '1.5',
  '1e3',
  '-0',
  '0x1f',
  ' 7',
  '007',
  'NaN',
  '',
] as const;

/** Nested `depth` deep, as arrays or objects. */
const deepJson = (depth: number, objects: boolean): unknown => {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = objects ? { a: value } : [value];
  return value;
};

/**
 * JSON inputs at and past their bounds (32 deep, 16 KB), or hundreds deep (thousands go in as
 * raw bodies below: this test's own JSON.stringify, and fast-check's, recurse).
 */
function hostileJson(g: Gen): unknown {
  return pick(g, [
    () => deepJson(g(fc.integer, { min: 28, max: 40 }), chance(g, 50)),
    () => deepJson(g(fc.integer, { min: 200, max: 800 }), chance(g, 50)),
    () => ({ blob: 'x'.repeat(g(fc.integer, { min: 15_000, max: 20_000 })) }),
  ])();
}

/** The same as document literals: deep nesting is written as text, never walked recursively here. */
function hostileJsonLiteral(g: Gen): string {
  const depth = pick(g, [g(fc.integer, { min: 28, max: 40 }), g(fc.integer, { min: 1_000, max: 6_000 })]);
  return chance(g, 50) ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{ a: '.repeat(depth)}1${' }'.repeat(depth)}`;
}

/** A JSON value as a GraphQL literal: object keys made into names, strings escaped. */
function jsonLiteral(value: unknown): string {
  if (value === null || typeof value !== 'object')
    return typeof value === 'number' && !Number.isFinite(value) ? '0' : JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(jsonLiteral).join(', ')}]`;
  const entries = Object.entries(value).map(
    ([key, v], i) => `${/^[A-Za-z_]\w*$/.test(key) ? key : `k${i}`}: ${jsonLiteral(v)}`,
  );
  return `{ ${entries.join(', ')} }`;
}

const generatedDocument = fc.gen().map((g) => new DocumentBuilder(g).document());

/** A generated document damaged: cut, or with random text spliced in. */
const damagedDocument = fc.tuple(generatedDocument, fc.nat(), fc.string({ maxLength: 12 })).map(([doc, at, junk]) => ({
  ...doc,
  query:
    doc.query.slice(0, at % (doc.query.length + 1)) +
    junk +
    doc.query.slice((at % (doc.query.length + 1)) + (junk ? 0 : 5)),
}));

const garbageDocument = fc.record({
  query: fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ maxLength: 80, unit: 'binary' }),
    fc.constantFrom('{', '}', '{ head(id: ) }', 'query { heads { nodes { ...F } } }', '#', 'subscription { x }'),
  ),
  variables: fc.dictionary(nameArb(), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
});

const authorization = fc.oneof(
  fc.constant(undefined),
  fc.constant('token'),
  fc.constant('Bearer garbage'),
  fc.string({ maxLength: 30, unit: 'grapheme-ascii' }).map((s) => `Bearer ${s}`),
);

const requestHeaders = (auth: string | undefined): Record<string, string> => {
  if (auth === undefined) return {};
  return { authorization: auth === 'token' ? `Bearer ${token}` : auth };
};

describe('random operations against the gateway', () => {
  it('never a 5xx, a crash, an unmasked error or a leak', async () => {
    const before = t.calls().length;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 8, arbitrary: generatedDocument },
          { weight: 1, arbitrary: damagedDocument },
          { weight: 1, arbitrary: garbageDocument },
        ),
        authorization,
        async (doc, auth) => {
          const answer = await send(graphqlPost(JSON.stringify(doc), requestHeaders(auth)));
          expectSafe(answer, JSON.stringify(doc).slice(0, 2_000));
          expectNotOurFault(answer, JSON.stringify(doc).slice(0, 2_000));
          // Whatever the document, the answer is a GraphQL response: an object with `data`, or
          // errors saying why there is none (a null body or a bare value is neither).
          expect(isGraphQLResponse(answer.json), `not a GraphQL response: ${answer.text.slice(0, 300)}`).toBe(true);
        },
      ),
      { seed: SEED, numRuns: runs(300) },
    );
    expect(t.reference.inFlight()).toBe(0);
    // Not only the parser and validation: many operations reached the upstream.
    expect(t.calls().length - before).toBeGreaterThan(50);
  });

  it('generates mostly valid operations (the property is not only testing the parser)', async () => {
    const sample = fc.sample(generatedDocument, { seed: SEED, numRuns: 60 });
    let executed = 0;
    for (const doc of sample) {
      const answer = await send(graphqlPost(JSON.stringify(doc), { authorization: `Bearer ${token}` }));
      const json = answer.json as { data?: unknown } | undefined;
      if (json && 'data' in json) executed++;
    }
    // Invalid values are deliberate, but a good share of the documents must reach execution.
    expect(executed).toBeGreaterThan(sample.length / 5);
  });
});

// ---- raw HTTP ----

const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'] as const;
const contentTypes = [
  undefined,
  'application/json',
  'application/json; charset=utf-8',
  'application/graphql-response+json',
  'application/graphql',
  'text/plain',
  'text/plain;charset=UTF-8',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'application/octet-stream',
  'application/json; charset=latin1',
  '*/*',
  'garbage',
];
const accepts = [
  undefined,
  'application/json',
  'application/graphql-response+json',
  'text/event-stream',
  'multipart/mixed',
  'text/html',
  '*/*',
  'nonsense/x',
];

const rawBody = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 300 }),
  fc.string({ maxLength: 100, unit: 'binary' }),
  fc
    .record(
      {
        query: fc.oneof(
          fc.jsonValue({ maxDepth: 1 }),
          generatedDocument.map((d) => d.query),
          fc.constant('{ heads(first: 2) { nodes { name } } }'),
        ),
        variables: fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant('{"id":1}')),
        operationName: fc.oneof(fc.jsonValue({ maxDepth: 1 }), nameArb()),
        extensions: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    )
    .map((v) => JSON.stringify(v)),
  fc
    .array(fc.record({ query: fc.constantFrom('{ heads(first: 1) { totalCount } }', '{ x }') }), { maxLength: 3 })
    .map((v) => JSON.stringify(v)),
  fc.constantFrom(
    '',
    '{',
    '{"query":',
    'null',
    '[]',
    '{"query": null}',
    'query=%7B%20heads%20%7B%20totalCount%20%7D%20%7D',
    '--xyz\r\nContent-Disposition: form-data; name="operations"\r\n\r\n{}\r\n--xyz--',
  ),
  fc
    .nat({ max: 50_000 })
    .map((n) =>
      JSON.stringify({ query: `{ heads(first: 1) { totalCount } }`, variables: { pad: 'x'.repeat(80_000 + n) } }),
    ),
  // Deep JSON where a JSON scalar or the request parameters take it.
  fc
    .integer({ min: 30, max: 6_000 })
    .map(
      (n) =>
        `{"query": "mutation($m: JSON) { updateHead(input: {id: \\"${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}\\", headMetadata: $m}) { head { id } } }", "variables": {"m": ${'['.repeat(n)}${']'.repeat(n)}}}`,
    ),
  fc
    .integer({ min: 30, max: 6_000 })
    .map((n) => `{"query": "{ __typename }", "extensions": ${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`),
);

const rawQueryString = fc.oneof(
  fc.constant(''),
  fc.constant('?query=%7B%20heads(first%3A%201)%20%7B%20totalCount%20%7D%20%7D'),
  fc.constant(
    '?query=mutation%20%7B%20login(input%3A%7Busername%3A%22a%22%2Cpassword%3A%22b%22%7D)%20%7B%20tokenType%20%7D%20%7D',
  ),
  fc
    .dictionary(
      fc.constantFrom('query', 'variables', 'operationName', 'extensions', 'x'),
      fc.string({ maxLength: 40 }),
      { maxKeys: 3 },
    )
    .map((d) => `?${new URLSearchParams(d).toString()}`),
  // Malformed or hostile `variables`/`extensions` beside a valid query.
  fc
    .record({
      name: fc.constantFrom('variables', 'extensions'),
      value: fc.oneof(
        fc.constantFrom(
          '{',
          '{bad',
          '[1,',
          '"x"',
          '[]',
          '42',
          'null',
          '{"persistedQuery": 5}',
          '{"persistedQuery": {"version": 1, "sha256Hash": 7}}',
        ),
        fc.integer({ min: 1_000, max: 6_000 }).map((n) => `{"m": ${'['.repeat(n)}${']'.repeat(n)}}`),
        fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v).slice(0, -1)),
      ),
    })
    .map(({ name, value }) => `?query=${encodeURIComponent('{ __typename }')}&${name}=${encodeURIComponent(value)}`),
);

describe('raw HTTP requests', () => {
  it('never a 5xx, a crash, an unmasked error or a leak', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          method: fc.constantFrom(...methods),
          path: fc.constantFrom(
            '/graphql',
            '/graphql/',
            '/',
            '/graphiql',
            '/health',
            '/ready',
            '/metrics',
            '/nope',
            '/graphql/../graphql',
          ),
          query: rawQueryString,
          contentType: fc.constantFrom(...contentTypes),
          accept: fc.constantFrom(...accepts),
          body: rawBody,
          auth: authorization,
          csrf: fc.boolean(),
        }),
        async (input) => {
          const headers: Record<string, string> = { ...requestHeaders(input.auth) };
          if (input.contentType !== undefined) headers['content-type'] = input.contentType;
          if (input.accept !== undefined) headers.accept = input.accept;
          if (input.csrf) headers['x-graphql-csrf'] = '1';
          const hasBody = input.method !== 'GET' && input.method !== 'HEAD';
          const request = new Request(`http://gateway${input.path}${input.query}`, {
            method: input.method,
            headers,
            ...(hasBody ? { body: input.body } : {}),
          });
          const answer = await send(request);
          expectSafe(answer, JSON.stringify({ ...input, body: input.body.slice(0, 1_000) }));
          expectNotOurFault(answer, JSON.stringify({ ...input, body: input.body.slice(0, 1_000) }));
        },
      ),
      { seed: SEED, numRuns: runs(300) },
    );
    expect(t.reference.inFlight()).toBe(0);
  });
});

// ---- off-contract upstream answers ----

type Path = readonly (string | number)[];

function pathsOf(value: unknown, prefix: Path = []): Path[] {
  if (typeof value !== 'object' || value === null) return [];
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value);
  return entries.flatMap(([key, child]) => [[...prefix, key], ...pathsOf(child, [...prefix, key])]);
}

type Mutation =
  | { kind: 'delete' }
  | { kind: 'set'; value: unknown }
  | { kind: 'huge'; length: number }
  /** On a page wrapper only: its numbers set to values on or over a boundary. */
  | { kind: 'wrapper'; key: 'total' | 'page' | 'size' | 'pages'; value: number };

/** Sets, replaces or deletes the value at a path of a (cloned) JSON value. */
function mutate(root: unknown, path: Path, mutation: Mutation): void {
  if (mutation.kind === 'wrapper') {
    if (typeof root === 'object' && root !== null && 'items' in root)
      (root as Record<string, unknown>)[mutation.key] = mutation.value;
    return;
  }
  let parent = root as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const key = path.at(-1)!;
  if (mutation.kind === 'delete') {
    if (Array.isArray(parent)) parent.splice(Number(key), 1);
    else delete parent[key];
  } else {
    // A copy: the same generated value goes into several bodies, and later mutations edit in place.
    parent[key] = mutation.kind === 'huge' ? 'h'.repeat(mutation.length) : structuredClone(mutation.value);
  }
}

const offContractValue = fc.oneof(
  fc.constant(null),
  fc.jsonValue({ maxDepth: 2 }),
  fc.string({ maxLength: 30 }),
  fc.constantFrom('PHR', 'unknown', '', 'Male', 'other', 'custom ', 'VOX', 'admin', 'superuser', 7),
  fc.constantFrom(
    '2024-01-01T00:00:00+0100',
    '2024-01-01T00:00:00',
    '2024-01-01T00:00:00.123456789Z',
    '2024-02-30T00:00:00Z',
    '2024-01-01T24:00:00Z',
    '0000-01-01T00:00:00Z',
    '9999-12-31T23:59:59.999+14:00',
    '2024-01-01',
    '2024-01-01 00:00:00Z',
  ),
  fc.constantFrom(
    'not a url',
    'mailto:x@example.org',
    'javascript:alert(1)',
    'http://',
    'ftp://example.org/x',
    'http://[::1]:80/x',
    'https://例え.jp/パス',
  ),
  fc.oneof(fc.double(), fc.integer(), fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 53 + 1, -1, 0, 0.5, 1e308, -0)),
  fc.oneof(fc.double(), fc.integer(), fc.constantFrom(2 ** 31 - 1, 2 ** 31, 2 ** 53 + 1, -1, 0, 0.5, 1e308, -0)),
  fc.uuid(),
);

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: 'delete' } as const) },
  { weight: 6, arbitrary: offContractValue.map((value) => ({ kind: 'set', value }) as const) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1_000, max: 200_000 }).map((length) => ({ kind: 'huge', length }) as const),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('wrapper' as const),
      key: fc.constantFrom('total' as const, 'page' as const, 'size' as const, 'pages' as const),
      value: fc.oneof(fc.constantFrom(0, 1, 2 ** 31 - 1, 2 ** 31, Number.MAX_SAFE_INTEGER), fc.nat({ max: 1_000 })),
    }),
  },
);

const offContractQueries = {
  head: `query($id: ID!) { head(id: $id) { id uuid name url arUrl outputFormat style version lod headMetadata createdAt updatedAt
    hair { id name url thumbnailUrl style sourceType gender objMetadata hairMetadata userId createdAt updatedAt payableData { price description } } } }`,
  headSmall: `query($id: ID!) { a: head(id: $id) { name createdAt hair { style } } b: node(id: $id) { id ... on Head { url } } }`,
  heads: `{ heads(first: 5) { totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { uuid name url createdAt updatedAt headMetadata hair { name style gender sourceType hairMetadata payableData { price } } } } } }`,
  headsLast: `{ heads(last: 3) { totalCount nodes { uuid name hair { id } } } }`,
  permissions: `{ permissions(first: 4) { totalCount pageInfo { hasNextPage endCursor } nodes { id role } } }`,
} as const;

type Target = keyof typeof offContractQueries;

/** The on-contract answer of each read a target's query may use, before mutation. */
function baseBodies(target: Target, id: string): Partial<Record<OperationName, unknown>> {
  const store = t.reference.store;
  const entry = store.findHead(id)!;
  const head = (shape: HeadShape) => store.project(entry, shape);
  const byId = {
    getHeadExt: head(HeadShape.A_EXT),
    getHeadById: [head(HeadShape.B)],
    getHeadExtById: head(HeadShape.B_EXT),
  };
  const live = store.headIds();
  const five = live.slice(0, 5).map((i) => store.findHead(i)!);
  switch (target) {
    case 'head':
    case 'headSmall':
      return byId;
    case 'heads':
    case 'headsLast':
      return {
        ...byId,
        listHeads: {
          items: five.map((e) => store.project(e, HeadShape.A)),
          total: live.length,
          page: 1,
          size: 5,
          pages: Math.ceil(live.length / 5),
        },
        listHeadsExt: five.map((e) => store.project(e, HeadShape.B_EXT)),
      };
    case 'permissions':
      return {
        getPermissions: {
          items: store
            .permissions()
            .slice(0, 4)
            .map((p) => ({ ...p })),
          total: 140,
          page: 1,
          size: 4,
          pages: 35,
        },
      };
  }
}

describe('off-contract upstream answers', () => {
  it('valid operations get data or coded errors, never a 5xx, a crash or a leak', async () => {
    const seen = { data: 0, upstreamError: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...(Object.keys(offContractQueries) as Target[])),
        fc.nat(),
        fc.array(fc.tuple(fc.nat(), mutationArb), { minLength: 1, maxLength: 3 }),
        fc.option(fc.jsonValue({ maxDepth: 3 }), { freq: 6 }),
        async (target, idIndex, mutations, wholeBody) => {
          t.reference.clearFaults();
          // Live ids: the random mutations above may have deleted heads.
          const live = t.reference.store.headIds();
          const id = live[idIndex % live.length]!;
          const bodies = baseBodies(target, id);
          for (const [operation, base] of Object.entries(bodies) as [OperationName, unknown][]) {
            let body: unknown = structuredClone(base);
            if (wholeBody !== null) {
              body = wholeBody;
            } else {
              for (const [at, mutation] of mutations) {
                // Half the time a top-level field (of the page wrapper or the head), else any path.
                const paths = at % 2 === 0 ? pathsOf(body).filter((path) => path.length === 1) : pathsOf(body);
                if (paths.length > 0) mutate(body, paths[Math.floor(at / 2) % paths.length]!, mutation);
              }
            }
            t.reference.injectFault(operation, { kind: 'off-contract', body });
          }
          const answer = await send(
            graphqlPost(JSON.stringify({ query: offContractQueries[target], variables: { id } }), {
              authorization: `Bearer ${token}`,
            }),
          );
          const context = `${target} ${id} ${JSON.stringify(wholeBody ?? mutations).slice(0, 1_500)}`;
          expectSafe(answer, context);
          expectDataOrCodedErrors(answer, context);
          const data = (answer.json as { data?: Record<string, unknown> | null }).data;
          if (data && Object.values(data).some((v) => v !== null)) seen.data++;
          if (errorsOf(answer.json).some((e) => e.extensions?.code === 'UPSTREAM_ERROR')) seen.upstreamError++;
        },
      ),
      { seed: SEED, numRuns: runs(250) },
    );
    // Not vacuous: some answers went through the resolvers with off-contract-but-accepted values
    // (enums outside the contract, odd dates and URLs), and many were refused at the boundary.
    expect(seen.data).toBeGreaterThan(10);
    expect(seen.upstreamError).toBeGreaterThan(10);
    t.reference.clearFaults();
    expect(t.reference.inFlight()).toBe(0);
  });
});

describe('defects the fuzzer found, now fixed', () => {
  it('a listing total beyond GraphQL Int is a coded UPSTREAM_ERROR, not INTERNAL_SERVER_ERROR', async () => {
    t.reference.injectFault('listHeads', {
      kind: 'off-contract',
      body: { items: [], total: 2 ** 31, page: 1, size: 5, pages: 1 },
    });
    const response = await t.execute(`{ heads(first: 5) { totalCount } }`);
    expect(response.errors?.map((e) => e.extensions?.code)).toEqual(['UPSTREAM_ERROR']);
  });
});

describe('logs', () => {
  it('never carry the token', async () => {
    // Lines of its own, whatever ran before it: an upstream failure of a read that carried the token.
    t.reference.injectFault('getHeadById', { kind: 'malformed-json' });
    const id = t.reference.store.headIds()[0]!;
    const answer = await send(
      graphqlPost(JSON.stringify({ query: `{ head(id: "${id}") { name } }` }), { authorization: `Bearer ${token}` }),
    );
    t.reference.clearFaults();
    expect(errorsOf(answer.json).map((error) => error.extensions?.code)).toEqual(['UPSTREAM_ERROR']);
    expect(t.logLines.length).toBeGreaterThan(0);
    const leaking = t.logLines.filter((line) => line.includes(token));
    expect(leaking).toEqual([]);
  });

  it('have no error-level line: nothing a client or an off-contract upstream sent is logged as a fault of the gateway', () => {
    expect(t.logLines.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
