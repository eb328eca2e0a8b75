import { setImmediate } from 'node:timers/promises';
import { getIntrospectionQuery, Lexer, Source, TokenKind } from 'graphql';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fragmentPairsFloor } from '../src/server/guards/fragment-pairs.js';
import {
  type Answer,
  answer,
  type GraphQLResponse,
  jsonHeaders,
  post as postTo,
  startTestGateway,
  type TestGateway,
} from './support/gateway.js';
import { sampleOf } from './support/metrics.js';

/*
 * One limit at a time: just under passes, just over is refused before execution with a code and
 * no upstream call. Refusals are not timed; "no upstream call" is what makes them cheap.
 */

let t: TestGateway;
let ids: string[];

beforeAll(async () => {
  t = await startTestGateway();
  ids = t.reference.store.headIds();
});

afterAll(() => t.close());

beforeEach(() => t.reset());

/** POST JSON to a gateway, keeping the HTTP status. */
const post = (query: string, variables?: Record<string, unknown>, on: TestGateway = t): Promise<Answer> =>
  postTo(on, { query, variables });

async function get(query: string, headers: Record<string, string> = {}, on: TestGateway = t): Promise<Answer> {
  return answer(
    await on.gateway.fetch(`http://gateway/graphql?query=${encodeURIComponent(query)}`, { method: 'GET', headers }),
  );
}

const codes = (body: GraphQLResponse) => (body.errors ?? []).map((e) => e.extensions?.code);
const messages = (body: GraphQLResponse) => (body.errors ?? []).map((e) => e.message).join('\n');

/** A refusal: 4xx, every error with a code, none of it reaching the upstream. */
function expectRefused(got: Answer, status: number, code: string, on: TestGateway = t): void {
  expect(got.status, JSON.stringify(got.body)).toBe(status);
  expect(got.body.data ?? undefined).toBeUndefined();
  expect(got.body.errors?.length).toBeGreaterThan(0);
  expect(codes(got.body)).toContain(code);
  for (const error of got.body.errors ?? []) expect(error.extensions?.code, error.message).toEqual(expect.any(String));
  expect(on.calls()).toEqual([]);
}

function expectPassed(got: Answer): void {
  expect(got.body.errors, JSON.stringify(got.body.errors)).toBeUndefined();
  expect(got.status).toBe(200);
  expect(got.body.data).toBeDefined();
}

/** Costs one upstream call when it runs, so a refusal's "no call" means something. */
const oneCall = 'heads(first: 1) { totalCount }';

/**
 * A selection `depth` fields deep, as Armor counts it: every field level counts, introspection
 * included; fragments (inline or named) add nothing. `__type` (1) › `ofType` × (depth − 2) › `name`.
 */
function typeChain(
  depth: number,
  fragments: 'none' | 'inline' | 'named' = 'none',
): { selection: string; definitions: string } {
  const levels = depth - 2;
  if (fragments === 'named') {
    // F0 on __Type { ofType { ...F1 } } … F(levels-1) on __Type { ofType { name } }
    const definitions = Array.from(
      { length: levels },
      (_, i) => `fragment F${i} on __Type { ofType { ${i === levels - 1 ? 'name' : `...F${i + 1}`} } }`,
    ).join('\n');
    return { selection: `__type(name: "Head") { ...F0 }`, definitions };
  }
  const open = fragments === 'inline' ? '... on __Type { ofType { ' : 'ofType { ';
  const close = fragments === 'inline' ? '} } ' : '} ';
  return { selection: `__type(name: "Head") { ${open.repeat(levels)}name ${close.repeat(levels)}}`, definitions: '' };
}

describe('depth (MAX_DEPTH, default 15)', () => {
  it('passes a selection 15 deep and refuses one 16 deep with GRAPHQL_VALIDATION_FAILED', async () => {
    for (const fragments of ['none', 'inline', 'named'] as const) {
      const at = typeChain(15, fragments);
      expectPassed(await post(`{ ${at.selection} ${oneCall} }\n${at.definitions}`));
      t.reset();
      const over = typeChain(16, fragments);
      const refused = await post(`{ ${over.selection} ${oneCall} }\n${over.definitions}`);
      expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED');
      expect(refused.body.errors![0]).toMatchObject({
        message: 'Query depth limit of 15 exceeded, found 16.',
        extensions: { limit: 'depth' },
      });
    }
  });

  it('counts real fields the same way; fragments add no depth', async () => {
    // The deepest data paths of the schema are 6 fields; fragments around them count nothing.
    const query = `query { heads(first: 1) { edges { node { ...H } } } } fragment H on Head { hair { ... on Hair { payableData { price } } } }`;
    expectPassed(await post(query));
    t.reset();
    const narrow = await startTestGateway({ env: { MAX_DEPTH: '5' } });
    try {
      const refused = await post(query, undefined, narrow);
      expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED', narrow);
      expect(messages(refused.body)).toBe('Query depth limit of 5 exceeded, found 6.');
      expectPassed(await post(`{ heads(first: 1) { edges { node { hair { name } } } } }`, undefined, narrow));
    } finally {
      await narrow.close();
    }
  });

  it("passes GraphiQL's introspection query, which is exactly 15 deep", async () => {
    // As GraphiQL (yoga's) sends it, and graphql's default.
    for (const query of [
      getIntrospectionQuery({ inputValueDeprecation: true, schemaDescription: true }),
      getIntrospectionQuery(),
    ]) {
      const got = await post(query);
      expectPassed(got);
      expect((got.body.data as { __schema: { queryType: { name: string } } }).__schema.queryType.name).toBe('Query');
    }
    expect(t.calls()).toEqual([]);
    const narrow = await startTestGateway({ env: { MAX_DEPTH: '14' } });
    try {
      const refused = await post(
        getIntrospectionQuery({ inputValueDeprecation: true, schemaDescription: true }),
        undefined,
        narrow,
      );
      expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED', narrow);
      expect(messages(refused.body)).toBe('Query depth limit of 14 exceeded, found 15.');
    } finally {
      await narrow.close();
    }
  });

  it('with INTROSPECTION=false refuses introspection with GRAPHQL_VALIDATION_FAILED; other queries still work', async () => {
    const closed = await startTestGateway({ env: { INTROSPECTION: 'false' } });
    try {
      for (const query of [
        getIntrospectionQuery({ inputValueDeprecation: true, schemaDescription: true }),
        `{ __type(name: "Head") { name } ${oneCall} }`,
      ]) {
        const refused = await post(query, undefined, closed);
        expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED', closed);
        expect(messages(refused.body)).toMatch(/introspection has been disabled/);
      }
      const got = await post(`{ __typename head(id: "${ids[0]}") { uuid name } }`, undefined, closed);
      expectPassed(got);
      expect(got.body.data).toMatchObject({ __typename: 'Query', head: { uuid: ids[0] } });
    } finally {
      await closed.close();
    }
  });
});

/** `n` aliased fields that cost no upstream call (aliases of `__typename` are not counted). */
const aliases = (n: number) =>
  `__type(name: "Head") { ${Array.from({ length: n }, (_, i) => `a${i}: name`).join(' ')} }`;

describe('aliases (MAX_ALIASES, default 30)', () => {
  it('passes 30 aliases and refuses 31 with GRAPHQL_VALIDATION_FAILED', async () => {
    expectPassed(await post(`{ ${aliases(30)} ${oneCall} }`));
    t.reset();
    const refused = await post(`{ ${aliases(31)} ${oneCall} }`);
    expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED');
    expect(refused.body.errors![0]).toMatchObject({
      message: 'Aliases limit of 30 exceeded, found 31.',
      extensions: { limit: 'aliases' },
    });
  });

  it('counts aliases inside fragments', async () => {
    const refused = await post(`{ ...Q ${oneCall} } fragment Q on Query { ${aliases(31)} }`);
    expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED');
  });
});

describe('tokens (MAX_TOKENS, default 2000)', () => {
  /** Lexical tokens as Armor counts them: every token the parser reads but the end. */
  function countTokens(document: string): number {
    const lexer = new Lexer(new Source(document));
    let count = 0;
    while (lexer.advance().kind !== TokenKind.EOF) count++;
    return count;
  }

  /**
   * Spreads of one fragment, 2 tokens each: cheap to validate (the same field repeated a
   * thousand times would trip graphql's own overlap budget first).
   */
  const document = (spreads: number, extra: string) =>
    `{ ${oneCall} ${extra} ${'...F '.repeat(spreads)}} fragment F on Query { __typename }`;

  it('passes 2000 tokens and refuses 2001 with GRAPHQL_PARSE_FAILED', async () => {
    const at = document(991, '');
    const over = document(991, '__typename');
    expect([countTokens(at), countTokens(over)]).toEqual([2000, 2001]);
    expectPassed(await post(at));
    t.reset();
    const refused = await post(over);
    expectRefused(refused, 400, 'GRAPHQL_PARSE_FAILED');
    expect(refused.body.errors![0]).toMatchObject({
      message: 'Syntax Error: Token limit of 2000 exceeded.',
      extensions: { limit: 'tokens' },
    });
  });
});

describe('directives (MAX_DIRECTIVES, default 20)', () => {
  const directives = (n: number) =>
    `{ ${oneCall} ${Array.from({ length: n }, (_, i) => `t${i}: __typename @include(if: true)`).join(' ')} }`;

  it('passes 20 directives and refuses 21 with GRAPHQL_VALIDATION_FAILED', async () => {
    expectPassed(await post(directives(20)));
    t.reset();
    const refused = await post(directives(21));
    expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED');
    expect(refused.body.errors![0]).toMatchObject({
      message: 'Directives limit of 20 exceeded, found 21.',
      extensions: { limit: 'directives' },
    });
  });
});

describe('body cap (MAX_BODY_BYTES, default 100000)', () => {
  /** A JSON body of exactly `bytes` bytes that costs one upstream call when it runs. */
  function body(bytes: number): string {
    const shape = (pad: string) => JSON.stringify({ query: `{ ${oneCall} }`, variables: { pad } });
    const text = shape('x'.repeat(bytes - shape('').length));
    expect(Buffer.byteLength(text)).toBe(bytes);
    return text;
  }

  /** No Content-Length: the body arrives in 8 KiB chunks. */
  function chunked(text: string): ReadableStream<Uint8Array> {
    const bytes = new TextEncoder().encode(text);
    let at = 0;
    return new ReadableStream({
      pull(controller) {
        if (at >= bytes.length) return controller.close();
        controller.enqueue(bytes.slice(at, at + 8192));
        at += 8192;
      },
    });
  }

  // Over the gateway's socket: fetch sends a string body with its Content-Length, a stream chunked.
  const send = async (init: RequestInit) =>
    answer(await t.gateway.fetch('http://gateway/graphql', { method: 'POST', headers: jsonHeaders(), ...init }));
  const expectTooLarge = (refused: Answer) => {
    expectRefused(refused, 413, 'PAYLOAD_TOO_LARGE');
    expect(JSON.stringify(refused.body)).not.toMatch(/\bat\s.*\.(ts|js):\d+/);
  };

  it('accepts 99 KB and refuses 101 KB with 413 PAYLOAD_TOO_LARGE, with a Content-Length', async () => {
    const accepted = await send({ body: body(99_000) });
    expectPassed(accepted);
    expect(t.calls()).toHaveLength(1);
    t.reset();
    expectTooLarge(await send({ body: body(101_000) }));
    expect(t.calls()).toHaveLength(0);
  });

  it('accepts 99 KB and refuses 101 KB with 413 PAYLOAD_TOO_LARGE, chunked (no Content-Length)', async () => {
    const init = (bytes: number) => ({ body: chunked(body(bytes)), duplex: 'half' }) as RequestInit;
    const accepted = await send(init(99_000));
    expectPassed(accepted);
    expect(t.calls()).toHaveLength(1);
    t.reset();
    expectTooLarge(await send(init(101_000)));
    expect(t.calls()).toHaveLength(0);
  });
});

describe('field suggestions', () => {
  const typos = `{ heads(first: 1) { totalCont } node(id: "x") { name } }`;
  const badEnum = `mutation($input: UpdateSubscriptionInput!) { updateSubscription(input: $input) { subscription { id } } }`;

  it('NODE_ENV=production hides every "Did you mean"', async () => {
    const production = await startTestGateway({ env: { NODE_ENV: 'production', UPSTREAM_URL: 'http://x/v2' } });
    try {
      const refused = await post(typos, undefined, production);
      expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED', production);
      expect(messages(refused.body)).toContain('Cannot query field "totalCont" on type "HeadConnection".');
      expect(messages(refused.body)).toContain('Cannot query field "name" on type "Node".');
      expect(JSON.stringify(refused.body)).not.toMatch(/did you mean/i);

      const variable = await post(badEnum, { input: { platformType: 'PUBLC' } }, production);
      expect(codes(variable.body)).toEqual(['BAD_USER_INPUT']);
      expect(JSON.stringify(variable.body)).not.toMatch(/did you mean/i);
      expect(production.calls()).toEqual([]);
    } finally {
      await production.close();
    }
  });

  it('outside production the suggestions stay', async () => {
    const refused = await post(typos);
    expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED');
    expect(messages(refused.body)).toContain('Did you mean "totalCount"?');
    expect(messages(refused.body)).toContain('Did you mean to use an inline fragment on "Head"?');
    const variable = await post(badEnum, { input: { platformType: 'PUBLC' } });
    expect(JSON.stringify(variable.body)).toContain('Did you mean the enum value');
  });
});

describe('HTTP method and CSRF', () => {
  it('refuses a mutation over GET with 405 and no upstream call', async () => {
    const got = await get(`mutation { login(input: { username: "a", password: "b" }) { accessToken } }`);
    expectRefused(got, 405, 'BAD_REQUEST');
    expect(got.headers.get('allow')).toBe('POST');
  });

  it('runs a GET query without any CSRF header or content type (the default: CSRF_PREVENTION off)', async () => {
    expectPassed(await get(`{ ${oneCall} }`));
    expect(t.calls()).toHaveLength(1);
  });

  describe('CSRF_PREVENTION=true', () => {
    let csrf: TestGateway;
    beforeAll(async () => {
      csrf = await startTestGateway({ env: { CSRF_PREVENTION: 'true' } });
    });
    afterAll(() => csrf.close());
    beforeEach(() => csrf.reset());

    it('refuses a GET query without a CSRF header or JSON content type with 403; a CSRF header or JSON content type lets it through', async () => {
      expectRefused(await get(`{ ${oneCall} }`, {}, csrf), 403, 'BAD_REQUEST', csrf);
      const withHeader = await get(`{ ${oneCall} }`, { 'x-graphql-csrf': '1' }, csrf);
      expectPassed(withHeader);
      expect(csrf.calls()).toHaveLength(1);
      csrf.reset();
      expectPassed(await get(`{ ${oneCall} }`, { 'content-type': 'application/json' }, csrf));
    });

    it('refuses a POST with a simple (non-preflighted) content type with 403', async () => {
      for (const contentType of [
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
      ]) {
        const response = await csrf.gateway.fetch('http://gateway/graphql', {
          method: 'POST',
          headers: { 'content-type': contentType },
          body: JSON.stringify({
            query: `mutation { login(input: { username: "a", password: "b" }) { accessToken } }`,
          }),
        });
        expectRefused(await answer(response), 403, 'BAD_REQUEST', csrf);
      }
    });
  });

  it('answers a multipart/form-data POST (a file upload; the schema takes none) with 415 and no upstream call, even with the CSRF header', async () => {
    const form = new FormData();
    form.set('operations', JSON.stringify({ query: `{ ${oneCall} }` }));
    form.set('map', '{}');
    const response = await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { 'x-graphql-csrf': '1' },
      body: form,
    });
    expect(response.status).toBe(415);
    expect(response.headers.get('x-request-id')).toEqual(expect.any(String));
    expect(t.calls()).toEqual([]);
  });
});

describe('CORS', () => {
  const preflight = (on: TestGateway, origin: string) =>
    on.gateway.fetch('http://gateway/graphql', {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type, authorization',
      },
    });
  /** A POST a browser sends without a preflight. */
  const simple = (on: TestGateway, origin: string) =>
    on.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: { ...jsonHeaders(), origin },
      body: JSON.stringify({ query: '{ __typename }' }),
    });

  it('CORS_ORIGINS=https://app.example.com allows that origin and no other', async () => {
    const cors = await startTestGateway({ env: { CORS_ORIGINS: 'https://app.example.com' } });
    try {
      const allowed = await preflight(cors, 'https://app.example.com');
      expect(allowed.status).toBeLessThan(300);
      expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
      expect(allowed.headers.get('access-control-allow-methods')).toContain('POST');
      // A named origin may send credentials (the Authorization header).
      expect(allowed.headers.get('access-control-allow-credentials')).toBe('true');
      // Another origin gets no CORS headers at all, so its browser refuses the response.
      const evil = await preflight(cors, 'https://evil.example.com');
      expect(evil.headers.get('access-control-allow-origin')).toBeNull();
      expect(cors.calls()).toEqual([]);
    } finally {
      await cors.close();
    }
  });

  it('with CORS_ORIGINS every answer varies by Origin (allowed, not allowed, none), so a cache keeps them apart', async () => {
    const cors = await startTestGateway({ env: { CORS_ORIGINS: 'https://app.example.com' } });
    try {
      const post = (origin?: string) =>
        cors.gateway.fetch('http://gateway/graphql', {
          method: 'POST',
          headers: { ...jsonHeaders(), ...(origin ? { origin } : {}) },
          body: JSON.stringify({ query: '{ __typename }' }),
        });
      for (const response of [
        await preflight(cors, 'https://app.example.com'),
        await preflight(cors, 'https://evil.example.com'),
        await post('https://app.example.com'),
        await post('https://evil.example.com'),
        await post(),
      ]) {
        // Once: one writer of Vary (the cache headers' rule), however many concerns vary the answer.
        expect(
          response.headers
            .get('vary')
            ?.split(/\s*,\s*/)
            .filter((name) => name === 'Origin'),
        ).toEqual(['Origin']);
      }
      expect((await preflight(cors, 'https://app.example.com')).headers.get('vary')?.split(/\s*,\s*/)).toContain(
        'Access-Control-Request-Headers',
      );
      expect((await post('https://app.example.com')).headers.get('access-control-expose-headers')).toContain(
        'retry-after',
      );
    } finally {
      await cors.close();
    }
  });

  it('with several CORS_ORIGINS an unlisted origin is not allowed', async () => {
    const cors = await startTestGateway({
      env: { CORS_ORIGINS: 'https://app.example.com, https://admin.example.com' },
    });
    try {
      expect((await preflight(cors, 'https://admin.example.com')).headers.get('access-control-allow-origin')).toBe(
        'https://admin.example.com',
      );
      expect((await preflight(cors, 'https://evil.example.com')).headers.get('access-control-allow-origin')).toBeNull();
    } finally {
      await cors.close();
    }
  });

  it('CORS_ORIGINS=* allows any origin, never with credentials', async () => {
    const cors = await startTestGateway({ env: { CORS_ORIGINS: '*' } });
    try {
      for (const origin of ['https://app.example.com', 'http://localhost:5173']) {
        const allowed = await preflight(cors, origin);
        expect(allowed.status).toBe(204);
        expect(allowed.headers.get('access-control-allow-origin')).toBe(origin);
        expect(allowed.headers.get('access-control-allow-credentials')).toBeNull();
      }
      const answered = await simple(cors, 'https://anywhere.example.org');
      expect(answered.status).toBe(200);
      expect(answered.headers.get('access-control-allow-origin')).toBe('https://anywhere.example.org');
      expect(answered.headers.get('access-control-allow-credentials')).toBeNull();
      expect(cors.calls()).toEqual([]);
    } finally {
      await cors.close();
    }
  });

  it('without CORS_ORIGINS no allow-origin header is sent', async () => {
    const answered = await preflight(t, 'https://app.example.com');
    expect(answered.headers.get('access-control-allow-origin')).toBeNull();
    const posted = await simple(t, 'https://app.example.com');
    expect(posted.status).toBe(200);
    expect(posted.headers.get('access-control-allow-origin')).toBeNull();
    expect(t.calls()).toEqual([]);
  });
});

describe('variables depth (MAX_VARIABLES_DEPTH, default 100)', () => {
  /**
   * A body whose `variables` carry `deep`, nested `levels` deep (the variables object itself is one), as a client would
   * write it.
   */
  const body = (levels: number, id: string, wrap: 'object' | 'list' = 'object') => {
    const [open, close] = wrap === 'object' ? ['{"a":', '}'] : ['[', ']'];
    return `{"query":"query Deep($id: ID!) { head(id: $id) { name } }","variables":{"id":"${id}","deep":${open.repeat(levels - 1)}1${close.repeat(levels - 1)}}}`;
  };
  const send = async (text: string, on: TestGateway = t) =>
    answer(await on.gateway.fetch('http://gateway/graphql', { method: 'POST', headers: jsonHeaders(), body: text }));
  const refusedForDepth = (got: Answer, on: TestGateway = t) => {
    expectRefused(got, 400, 'BAD_REQUEST', on);
    expect(got.body.errors?.[0]?.extensions).toMatchObject({ limit: 'variables_depth', maxVariablesDepth: 100 });
  };

  it('100 levels pass, 101 are refused with 400 and no upstream call, objects and lists alike', async () => {
    expectPassed(await send(body(100, ids[0]!)));
    t.reset();
    refusedForDepth(await send(body(101, ids[0]!)));
    refusedForDepth(await send(body(101, ids[0]!, 'list')));
  });

  it("the attack's 8,000 levels: refused as the client's mistake, logged as nothing of ours, with the response cache on too", async () => {
    refusedForDepth(await send(body(8_000, ids[0]!)));
    const cached = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: '60000' } });
    try {
      refusedForDepth(await send(body(8_000, ids[0]!), cached), cached);
      expect(cached.logLines.filter((line) => (JSON.parse(line) as { level: number }).level >= 50)).toEqual([]);
    } finally {
      await cached.close();
    }
  });

  it("a batch's too-deep operation is refused, its others answered", async () => {
    const got = await t.gateway.fetch('http://gateway/graphql', {
      method: 'POST',
      headers: jsonHeaders(),
      body: `[${body(8_000, ids[0]!)},${body(2, ids[0]!)}]`,
    });
    const answers = (await got.json()) as GraphQLResponse[];
    expect(answers[0]!.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_REQUEST', limit: 'variables_depth' });
    expect(answers[1]!.data).toEqual({ head: { name: expect.any(String) } });
  });

  it('a hot query run by its compiled code (a real port) is refused the same, and the gateway goes on serving', async () => {
    const endpoint = await t.listen();
    const over = (text: string) =>
      fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: text });
    for (let i = 0; i < 3; i++) expect((await over(body(2, ids[1]!))).status).toBe(200);
    const refused = await over(body(8_000, ids[1]!));
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as GraphQLResponse).errors?.[0]?.extensions).toMatchObject({
      code: 'BAD_REQUEST',
      limit: 'variables_depth',
    });
    expect((await over(body(2, ids[1]!))).status).toBe(200);
  });
});

describe('fragment pairs (MAX_FRAGMENT_PAIRS, default 5000): what validation costs, bounded before it is paid', () => {
  /**
   * The attack's document: one field with `spreads` distinct fragments spread side by side on the same type (some 8 KB
   * at 135; ten in a batch within MAX_BODY_BYTES).
   */
  const spreadDocument = (spreads: number, seed: string) => {
    const name = (i: number) => `F${seed}_${i}`;
    const fields = ['name', 'url', 'createdAt'];
    const fragments = Array.from({ length: spreads }, (_, i) => `fragment ${name(i)} on Head { ${fields[i % 3]} }`);
    return `query Q${seed} { heads(first: 1) { nodes { ${fragments.map((_, i) => `...${name(i)}`).join(' ')} } } }\n${fragments.join('\n')}`;
  };
  // Over real HTTP, as the attack came.
  let url: string;
  beforeAll(async () => {
    url = await t.listen();
  });
  const batch = async (documents: string[]) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: jsonHeaders(),
      body: JSON.stringify(documents.map((query) => ({ query }))),
    });
    return { status: response.status, answers: (await response.json()) as GraphQLResponse[] };
  };
  const refusedForFragments = (body: GraphQLResponse) =>
    expect(body.errors?.[0]?.extensions).toMatchObject({
      code: 'GRAPHQL_VALIDATION_FAILED',
      limit: 'fragments',
      maxFragmentPairs: 5_000,
    });

  it("the attack's document (135 fragments side by side: 9,045 pairs) is refused with 400 and no upstream call; 100 (4,950) pass", async () => {
    const refused = await post(spreadDocument(135, 'a'));
    expectRefused(refused, 400, 'GRAPHQL_VALIDATION_FAILED');
    refusedForFragments(refused.body);
    expect(refused.body.errors?.[0]?.extensions?.fragmentPairs).toBe(9_045);
    expectPassed(await post(spreadDocument(100, 'b')));
  });

  it("the attack's batch (ten such documents) is refused whole, before any is parsed: no upstream call, nothing kept", async () => {
    const parsed = async () => sampleOf(await t.metrics.scrape(), 'gateway_document_cache_entries{cache="parsed"}');
    const before = await parsed();
    const { answers } = await batch(Array.from({ length: 10 }, (_, i) => spreadDocument(135, `batch${i}`)));
    expect(answers).toHaveLength(10);
    for (const body of answers) refusedForFragments(body);
    // Counted from the lexer's tokens: each refused before the parser built anything (a parsed document would be kept).
    expect(answers[0]!.errors?.[0]?.message).toContain('at least 9045 pairs');
    expect(await parsed()).toBe(before);
    expect(t.calls()).toEqual([]);
  });

  it("parses and validates a batch's new documents one a turn of the event loop, so other requests are served between them", async () => {
    const parsed = async () => sampleOf(await t.metrics.scrape(), 'gateway_document_cache_entries{cache="parsed"}')!;
    const before = await parsed();
    const answered = batch(Array.from({ length: 10 }, (_, i) => spreadDocument(32, `turns${i}`)));
    // Read between turns: the kept documents grow one at a time, not ten in one turn.
    const seen = new Set<number>();
    for (let kept = before; kept < before + 10; kept = await parsed()) {
      seen.add(kept - before);
      await setImmediate();
    }
    expect([...seen].filter((count) => count > 0 && count < 10).length).toBeGreaterThanOrEqual(5);
    for (const body of (await answered).answers) expect(body.errors).toBeUndefined();
  });

  it('counts no pair the lexer cannot see: spreads in separate selections, inline fragments and object values are not pairs', () => {
    expect(fragmentPairsFloor('{ a { ...A ...B ...C } b { ...A ...B } }')).toBe(4);
    expect(fragmentPairsFloor('{ a(input: { x: 1 }) { ... on T { ...A } ...B } ...A ...A }')).toBe(0);
    // A selection never closed is the parser's to refuse.
    expect(fragmentPairsFloor('{ a { ...A ...B')).toBe(0);
    expect(fragmentPairsFloor('{ a { ...A ...B } } "unterminated')).toBe(0);
  });

  it("a batch's documents share the budget: 60 fragments each (1,770 pairs), the third is refused; the same document twice counts once; a refusal is not the document's for another request", async () => {
    const [first, second, third] = ['s1', 's2', 's3'].map((seed) => spreadDocument(60, seed)) as [
      string,
      string,
      string,
    ];
    const shared = await batch([first, second, third]);
    expect(shared.answers[0]!.data).toBeDefined();
    expect(shared.answers[1]!.data).toBeDefined();
    refusedForFragments(shared.answers[2]!);
    expect(shared.answers[2]!.errors?.[0]?.message).toContain('already make 3540');
    const twice = await batch([first, first, first, second]);
    for (const body of twice.answers) expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
    // Refused for what its batch had spent, not for itself: alone it is validated and answered.
    expectPassed(await post(third));
  });
});
