import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { sampleOf } from './support/metrics.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';

/*
 * The lane of cached answers (server/hit-lane.ts): with the response cache in memory and no
 * caller limit, a plain JSON query whose answer is kept is answered before yoga, over a real
 * port, with the same status, body and headers as the pipeline answers it (its hit through
 * `/graphql?via=pipeline`, which the lane leaves to yoga), counted as a hit and an operation.
 */

const query = (id: string) => `query LaneHead { head(id: "${id}") { name hair { name } } }`;

describe('the lane of cached answers', () => {
  let t: TestGateway;
  let endpoint: string;
  let ids: string[];
  beforeAll(async () => {
    t = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: '60000' } });
    endpoint = await t.listen();
    ids = t.reference.store.headIds();
  });
  afterAll(() => t.close());

  const early = async () => sampleOf(await t.metrics.registry.metrics(), 'gateway_response_cache_early_answers_total') ?? 0;
  const hits = async () => sampleOf(await t.metrics.registry.metrics(), 'gateway_response_cache_lookups_total{result="hit"}') ?? 0;
  const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'identity', ...headers }, body: JSON.stringify(body) });
  const shown = async (response: Response) => ({
    status: response.status,
    body: await response.text(),
    headers: Object.fromEntries(['content-type', 'etag', 'cache-control', 'vary', 'x-request-id'].map((name) => [name, response.headers.get(name)])),
  });

  const accepts: (string | undefined)[] = [undefined, '*/*', 'application/json', 'application/graphql-response+json', 'application/graphql-response+json, application/json'];
  for (const accept of accepts) {
    for (const token of [undefined, 'lane-token']) {
      it(`answers a kept answer as the pipeline does (Accept ${accept ?? 'absent'}, ${token === undefined ? 'no token' : 'a token'})`, async () => {
        const id = ids[accepts.indexOf(accept) * 2 + (token === undefined ? 0 : 1)]!;
        const headers = { ...(accept === undefined ? {} : { accept }), ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), 'x-request-id': `lane-${id}` };
        const body = { query: query(id) };
        // The miss, through the pipeline: kept.
        const first = await post(endpoint, body, headers);
        expect(first.status).toBe(200);
        t.reset();
        const [hitsBefore, earlyBefore] = [await hits(), await early()];
        const pipeline = await shown(await post(`${endpoint}?via=pipeline`, body, headers));
        expect(await early()).toBe(earlyBefore);
        const lane = await shown(await post(endpoint, body, headers));
        expect(await early()).toBe(earlyBefore + 1);
        expect(await hits()).toBe(hitsBefore + 2);
        expect(t.calls()).toEqual([]);
        expect(lane).toEqual(pipeline);
        expect(JSON.parse(lane.body)).toEqual({ data: { head: expect.objectContaining({ name: expect.any(String) }) } });
        expect(lane.headers['cache-control']).toMatch(token === undefined ? /^public, max-age=\d+$/ : /^private, max-age=\d+$/);
      });
    }
  }

  it('leaves to the pipeline what it does not take: a browser origin, an Accept with q-values, an extension, a batch, a body it cannot read', async () => {
    const id = ids[12]!;
    const body = { query: query(id) };
    expect((await post(endpoint, body)).status).toBe(200);
    t.reset();
    const before = await early();
    const others: [unknown, Record<string, string>][] = [
      [body, { origin: 'https://app.example' }],
      [body, { accept: 'application/json;q=0.9, application/graphql-response+json' }],
      [{ ...body, extensions: { clientLibrary: { name: 'x' } } }, {}],
      [[body], {}],
    ];
    for (const [sent, headers] of others) expect((await post(endpoint, sent, headers)).status, JSON.stringify(headers)).toBe(200);
    const broken = await fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{ not json' });
    expect(broken.status).toBe(400);
    expect(await early()).toBe(before);
    expect(t.calls()).toEqual([]);
  });

  it('a miss goes on to the pipeline with the body it read, once: one upstream call, then kept', async () => {
    const id = ids[13]!;
    t.reset();
    const before = await early();
    const missed = await post(endpoint, { query: query(id) });
    expect(missed.status).toBe(200);
    expect(t.calls('getHeadById').length + t.calls('getHeadExt').length + t.calls().length).toBeGreaterThan(0);
    const calls = t.calls().length;
    expect(await early()).toBe(before);
    expect((await post(endpoint, { query: query(id) })).status).toBe(200);
    expect(await early()).toBe(before + 1);
    expect(t.calls()).toHaveLength(calls);
  });

  it('a mutation that changes a kept head is never answered from the lane afterwards: the next read goes upstream', async () => {
    const id = ids[14]!;
    const login = await t.execute<{ login: { accessToken: string } }>('mutation ($input: LoginInput!) { login(input: $input) { accessToken } }', { input: DEMO_CREDENTIALS });
    const token = login.data?.login.accessToken;
    expect(token).toEqual(expect.any(String));
    expect((await post(endpoint, { query: query(id) })).status).toBe(200);
    const before = await early();
    const updated = await post(endpoint, { query: `mutation { updateHead(input: { id: "${id}", name: "Lane renamed" }) { head { name } } }` }, token === undefined ? {} : { authorization: `Bearer ${token}` });
    expect(updated.status).toBe(200);
    t.reset();
    const read = await post(endpoint, { query: query(id) });
    expect(JSON.parse(await read.text()).data.head.name).toBe('Lane renamed');
    expect(t.calls().length).toBeGreaterThan(0);
    expect(await early()).toBe(before);
  });
});

describe('the lane of cached answers is off', () => {
  it('with a caller limit (their admission is the pipeline\'s): every hit goes through yoga', async () => {
    const t = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: '60000', RATE_LIMIT_REQUESTS_PER_SECOND: '1000' } });
    try {
      const endpoint = await t.listen();
      const body = JSON.stringify({ query: query(t.reference.store.headIds()[0]!) });
      for (let i = 0; i < 3; i++) expect((await fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).status).toBe(200);
      const text = await t.metrics.registry.metrics();
      expect(sampleOf(text, 'gateway_response_cache_lookups_total{result="hit"}')).toBe(2);
      expect(sampleOf(text, 'gateway_response_cache_early_answers_total')).toBe(0);
      expect(t.calls()).toHaveLength(1);
    } finally {
      await t.close();
    }
  });

  it('with trusted documents only: a manifest document\'s text is refused as before, though its answer is kept', async () => {
    const manifestFile = fileURLToPath(new URL('../src/generated/persisted-documents.json', import.meta.url));
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Record<string, string>;
    const [documentId, text] = Object.entries(manifest).find(([, document]) => document.startsWith('query HeadWithHair'))!;
    const t = await startTestGateway({ env: { RESPONSE_CACHE_TTL_MS: '60000', TRUSTED_DOCUMENTS_FILE: manifestFile, TRUSTED_DOCUMENTS_ONLY: 'true' } });
    try {
      const endpoint = await t.listen();
      const variables = { id: t.reference.store.headIds()[0]! };
      const send = (body: unknown) => fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      for (let i = 0; i < 2; i++) expect((await send({ documentId, variables })).status).toBe(200);
      const refused = await send({ query: text, variables });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('PERSISTED_QUERY_ONLY');
      expect(sampleOf(await t.metrics.registry.metrics(), 'gateway_response_cache_early_answers_total')).toBe(0);
    } finally {
      await t.close();
    }
  });
});
