import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jsonHeaders, startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * Every answer to a request with Authorization says `Cache-Control: private, no-store` and
 * `Vary: Authorization` (issue 22), whoever answers it: the gateway (a GET, a POST, a refusal, a
 * caller refused at the door, the probes) or the HTTP server before it (an Accept-Encoding it
 * cannot meet).
 */

let t: TestGateway;
let url: string;
beforeAll(async () => {
  // TRUST_PROXY: each caller below comes from an address of its own (a made-up token shares its address's limits).
  t = await startTestGateway({
    env: { CORS_ORIGINS: 'https://app.example.com', RATE_LIMIT_REQUESTS_PER_SECOND: '1', TRUST_PROXY: 'true' },
  });
  url = await t.listen();
});
afterAll(() => t.close());

let addresses = 10;
/** A caller's token, from an address of its own. */
const token = (name: string) => ({ authorization: `Bearer ${name}`, 'x-forwarded-for': `198.51.100.${addresses++}` });

async function headersOf(
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; cacheControl: string | null; vary: string[] }> {
  const response = await fetch(url.replace('/graphql', path), init);
  await response.arrayBuffer();
  return {
    status: response.status,
    cacheControl: response.headers.get('cache-control'),
    vary: (response.headers.get('vary') ?? '').split(/\s*,\s*/).filter(Boolean),
  };
}

const query = encodeURIComponent('{ __typename }');

describe('answers to a request with Authorization', () => {
  it.each([
    ['a GET query', `/graphql?query=${query}`, { headers: { 'x-graphql-csrf': '1', ...token('get') } }, 200],
    [
      'a POST',
      '/graphql',
      {
        method: 'POST',
        headers: { ...jsonHeaders(), ...token('post') },
        body: JSON.stringify({ query: '{ __typename }' }),
      },
      200,
    ],
    [
      'a refusal (a body that is not JSON)',
      '/graphql',
      { method: 'POST', headers: { ...jsonHeaders(), ...token('refused') }, body: '{' },
      400,
    ],
    [
      "a browser's request (CORS: Origin kept in Vary)",
      '/graphql',
      {
        method: 'POST',
        headers: { ...jsonHeaders(), ...token('browser'), origin: 'https://app.example.com' },
        body: JSON.stringify({ query: '{ __typename }' }),
      },
      200,
    ],
    ['/health', '/health', { headers: token('probe') }, 200],
    ['/metrics', '/metrics', { headers: token('scraper') }, 200],
    [
      'an Accept-Encoding the server cannot meet (answered before the gateway)',
      '/graphql',
      {
        method: 'POST',
        headers: { ...jsonHeaders(), ...token('coding'), 'accept-encoding': 'identity;q=0' },
        body: '{}',
      },
      406,
    ],
  ] as const)('%s: Cache-Control private, no-store; Vary: Authorization', async (_, path, init, status) => {
    const answer = await headersOf(path, init as RequestInit);
    expect(answer.status).toBe(status);
    expect(answer.cacheControl).toBe('private, no-store');
    expect(answer.vary).toContain('Authorization');
    if ('origin' in (init.headers ?? {})) expect(answer.vary).toContain('Origin');
  });

  it('a caller refused at the door (before its body is read) gets them too, as every answer does (CORS on: Vary Origin)', async () => {
    const caller = {
      method: 'POST',
      headers: { ...jsonHeaders(), ...token('door') },
      body: JSON.stringify({ query: '{ __typename }' }),
    };
    const statuses = await Promise.all([
      headersOf('/graphql', caller),
      headersOf('/graphql', caller),
      headersOf('/graphql', caller),
    ]);
    expect(statuses.map((a) => a.status).sort()).toEqual([200, 200, 429]);
    const door = await headersOf('/graphql', caller);
    expect(door.status).toBe(429);
    expect(door.cacheControl).toBe('private, no-store');
    expect(door.vary).toEqual(expect.arrayContaining(['Authorization', 'Origin']));
  });

  it('an answer to a request without Authorization says nothing of the kind', async () => {
    const answer = await headersOf(`/graphql?query=${query}`, {
      headers: { 'x-graphql-csrf': '1', 'x-forwarded-for': '198.51.100.9' },
    });
    expect(answer.status).toBe(200);
    expect(answer.cacheControl).toBeNull();
    expect(answer.vary).not.toContain('Authorization');
  });
});
