import { DEMO_CREDENTIALS } from '../../src/reference-upstream/seed.js';
import { MAX_JSON_BYTES } from '../../src/schema/inputs.js';
import { type Answer, answer, post, type TestGateway } from './gateway.js';

/*
 * The attacks of the abuse-resistance issue (12) and the planner's fragment fan-out, as they were
 * sent: test/abuse.test.ts and test/plan.test.ts hold each to its refusal and its cost in counts;
 * bench/checks/held-up.test.ts times a `{ __typename }` beside each.
 */

export const json = (query: string, variables?: Record<string, unknown>) => JSON.stringify({ query, variables });
export const cursor = (offset: number | string) => Buffer.from(`OffsetConnection:${offset}`).toString('base64');
export const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
export const updateMetadata =
  'mutation($id: ID!, $m: JSON) { updateHead(input: { id: $id, headMetadata: $m }) { head { id } } }';

/** A GET of /graphql with `search` as its query string. */
export const getFrom = async (on: TestGateway, search: string): Promise<Answer> =>
  answer(
    await on.gateway.fetch(`http://gateway/graphql?${search}`, {
      headers: { accept: 'application/json', 'x-graphql-csrf': '1' },
    }),
  );

export interface Attack {
  readonly name: string;
  readonly send: () => Promise<Answer>;
  readonly status: number;
  readonly code: string;
  /**
   * Where it is turned away: before execution (the answer has no `data` entry at all, as GraphQL
   * answers an error raised before execution begins), or by the field's own argument check in
   * execution (`data: null`), before any upstream call either way.
   */
  readonly refused: 'before execution' | 'by its field';
}

/** The corpus against the gateway `on()` returns, once it is started (`on` is read when an attack is sent). */
export function abuseAttacks(on: () => TestGateway): Attack[] {
  const send = (body: string) => () => post(on(), body);
  const id = () => on().reference.store.headIds()[0]!;
  return [
    {
      name: '640 `a: __typename` aliases (10 KB asking for an 885 KB answer)',
      send: send(json(`{ ${Array.from({ length: 640 }, (_, i) => `a${i}: __typename`).join(' ')} }`)),
      status: 400,
      code: 'GRAPHQL_VALIDATION_FAILED',
      refused: 'before execution',
    },
    {
      name: 'a variable that fails coercion, with a password in it',
      send: send(
        json('mutation($i: LoginInput!) { login(input: $i) { accessToken } }', {
          i: { ...DEMO_CREDENTIALS, remember: true },
        }),
      ),
      status: 200,
      code: 'BAD_USER_INPUT',
      refused: 'before execution',
    },
    {
      name: 'an invalid JSON body',
      send: send('{"query": "{ __typename }", "variables": {"password": "demo-password"'),
      status: 400,
      code: 'BAD_REQUEST',
      refused: 'before execution',
    },
    {
      name: '5,000 nested arrays in headMetadata (variable)',
      send: () =>
        post(
          on(),
          `{"query": ${JSON.stringify(updateMetadata)}, "variables": {"id": "${id()}", "m": ${nested(5_000)}}}`,
        ),
      // Deeper than MAX_VARIABLES_DEPTH: refused before anything reads the variables.
      status: 400,
      code: 'BAD_REQUEST',
      refused: 'before execution',
    },
    {
      name: '5,000 nested arrays in headMetadata (literal)',
      send: () =>
        post(
          on(),
          json(`mutation { updateHead(input: { id: "${id()}", headMetadata: ${nested(5_000)} }) { head { id } } }`),
        ),
      status: 400,
      code: 'GRAPHQL_PARSE_FAILED',
      refused: 'before execution',
    },
    {
      name: 'headMetadata 33 deep',
      send: () =>
        post(on(), `{"query": ${JSON.stringify(updateMetadata)}, "variables": {"id": "${id()}", "m": ${nested(33)}}}`),
      status: 200,
      code: 'BAD_USER_INPUT',
      refused: 'before execution',
    },
    {
      name: 'headMetadata 33 deep (literal)',
      send: () =>
        post(
          on(),
          json(`mutation { updateHead(input: { id: "${id()}", headMetadata: ${nested(33)} }) { head { id } } }`),
        ),
      status: 400,
      code: 'BAD_USER_INPUT',
      refused: 'before execution',
    },
    {
      name: `headMetadata over ${MAX_JSON_BYTES} bytes`,
      send: () => post(on(), json(updateMetadata, { id: id(), m: { blob: 'x'.repeat(MAX_JSON_BYTES) } })),
      status: 200,
      code: 'BAD_USER_INPUT',
      refused: 'before execution',
    },
    ...[2 ** 53 - 1, 1e14, 2 ** 31, '-1', '1.5', '1e3', '0x10', '007'].map(
      (offset): Attack => ({
        name: `a forged cursor with offset ${offset}`,
        send: send(json(`{ heads(first: 1, after: "${cursor(offset)}") { totalCount } }`)),
        status: 200,
        code: 'BAD_USER_INPUT',
        refused: 'by its field',
      }),
    ),
    {
      name: 'malformed GET variables',
      send: () => getFrom(on(), `query=${encodeURIComponent('{ __typename }')}&variables=%7Bnot-json`),
      status: 400,
      code: 'BAD_REQUEST',
      refused: 'before execution',
    },
    {
      name: 'malformed GET extensions',
      send: () => getFrom(on(), `query=${encodeURIComponent('{ __typename }')}&extensions=%5B%5B`),
      status: 400,
      code: 'BAD_REQUEST',
      refused: 'before execution',
    },
    {
      name: 'POST variables that are not an object',
      send: send('{"query": "{ __typename }", "variables": [1, 2]}'),
      status: 400,
      code: 'BAD_REQUEST',
      refused: 'before execution',
    },
    {
      name: 'POST extensions that are not an object',
      send: send('{"query": "{ __typename }", "extensions": "x"}'),
      status: 400,
      code: 'BAD_REQUEST',
      refused: 'before execution',
    },
  ];
}

/**
 * The fragment fan-out of the planner issue, as it was sent: 20 × 190 × 100 × 329 field paths in
 * 5.5 KB and 2,000 tokens, inside every limit but MAX_REPEATED_FIELDS. `k` trailing spaces make
 * each copy new to the parse cache.
 */
export function fanOut(k = 0): string {
  const [roots, nodes, hairs, names] = [20, 190, 100, 329];
  const repeat = (text: string, n: number) => Array.from({ length: n }, () => text).join(' ');
  return `query{${repeat('heads(first:1){...C}', roots)}} fragment C on HeadConnection{${repeat('nodes{...N}', nodes)}} fragment N on Head{${repeat('hair{...H}', hairs)}} fragment H on Hair{${repeat('name', names)}}${' '.repeat(k)}`;
}

/**
 * An ordinary document of `length` characters: aliases of one page with most of its fields, as a
 * screen might ask (a field repeated a thousand times would trip graphql-js's own overlap budget).
 * `k` names the operation, so that each copy is new to the parse cache.
 */
export function plainOfLength(length: number, k = 0): string {
  const page = (i: number) =>
    `h${i}: heads(first: 1) { nodes { id uuid name url arUrl outputFormat style version lod createdAt updatedAt hair { id name url thumbnailUrl style sourceType gender createdAt updatedAt } } pageInfo { hasNextPage endCursor } }`;
  let body = '';
  for (let i = 0; `query Plain${k} { ${body} ${page(i)} }`.length <= length; i++) body += ` ${page(i)}`;
  const query = `query Plain${k} {${body} }`;
  return query + ' '.repeat(length - query.length);
}
