import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { sampleOf } from './support/metrics.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { until } from './support/until.js';

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

/*
 * The lane's hot queries (server/lane.ts): without a response cache, a query the pipeline has
 * executed and compiled is run before yoga by its compiled code, after the same plan. Over a
 * real port, each answer is compared with the pipeline's answer to the same request
 * (`/graphql?via=pipeline`, which the lane leaves to yoga): status, body, headers, upstream calls.
 */
const hotQuery = 'query LaneHot($id: ID!) { head(id: $id) { name url hair { name } } }';

async function laneGateway(env: Record<string, string> = {}) {
  const t = await startTestGateway({ env });
  const endpoint = await t.listen();
  const counted = async (series: string) => sampleOf(await t.metrics.registry.metrics(), series) ?? 0;
  const send = (url: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'accept-encoding': 'identity', ...headers }, body: JSON.stringify(body) });
  /** One request's answer, through the lane (or, `via: pipeline`, through yoga), with the upstream calls it made. */
  const shown = async (body: unknown, headers: Record<string, string> = {}, via: 'lane' | 'pipeline' = 'lane') => {
    t.reset();
    const response = await send(via === 'lane' ? endpoint : `${endpoint}?via=pipeline`, body, { 'x-request-id': 'lane-or-pipeline', ...headers });
    return {
      status: response.status,
      body: await response.text(),
      headers: Object.fromEntries(['content-type', 'etag', 'cache-control', 'vary', 'x-request-id', 'retry-after'].map((name) => [name, response.headers.get(name)])),
      calls: t.calls().map((call) => call.operation),
    };
  };
  /** The pipeline runs a query twice: at its second run (COMPILED_EXECUTION_AT_RUN) it is compiled. */
  const warm = async (body: unknown, headers: Record<string, string> = {}) => {
    for (let i = 0; i < 2; i++) await shown(body, headers, 'pipeline');
  };
  const early = () => counted('gateway_compiled_early_answers_total');
  return { t, endpoint, send, shown, warm, early, counted };
}

describe("the lane's hot queries", () => {
  let g: Awaited<ReturnType<typeof laneGateway>>;
  let ids: string[];
  beforeAll(async () => {
    g = await laneGateway();
    ids = g.t.reference.store.headIds();
  });
  afterAll(() => g.t.close());

  const accepts: (string | undefined)[] = [undefined, '*/*', 'application/json', 'application/graphql-response+json', 'application/graphql-response+json, application/json'];
  for (const accept of accepts) {
    for (const token of [undefined, 'hot-token']) {
      it(`answers a compiled query as the pipeline does (Accept ${accept ?? 'absent'}, ${token === undefined ? 'no token' : 'a token'})`, async () => {
        const id = ids[20 + accepts.indexOf(accept) * 2 + (token === undefined ? 0 : 1)]!;
        const headers = { ...(accept === undefined ? {} : { accept }), ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), 'x-request-id': `hot-${id}` };
        const body = { query: hotQuery, variables: { id }, operationName: 'LaneHot' };
        await g.warm(body, headers);
        const before = await g.early();
        const pipeline = await g.shown(body, headers, 'pipeline');
        expect(await g.early()).toBe(before);
        const lane = await g.shown(body, headers);
        expect(await g.early()).toBe(before + 1);
        expect(lane).toEqual(pipeline);
        expect(lane.calls.length).toBeGreaterThan(0);
        expect(JSON.parse(lane.body)).toEqual({ data: { head: expect.objectContaining({ name: expect.any(String), url: expect.any(String) }) } });
        expect(lane.headers['cache-control']).toBe(token === undefined ? null : 'private, no-store');
      });
    }
  }

  it('answers a query with errors as the pipeline does: a head the upstream does not have, and another variable value of the same document', async () => {
    const body = (id: string) => ({ query: hotQuery, variables: { id } });
    await g.warm(body(ids[40]!));
    const missing = '00000000-0000-4000-8000-000000000000';
    for (const accept of ['application/json', 'application/graphql-response+json']) {
      const before = await g.early();
      const pipeline = await g.shown(body(missing), { accept }, 'pipeline');
      const lane = await g.shown(body(missing), { accept });
      expect(await g.early()).toBe(before + 1);
      expect(lane).toEqual(pipeline);
      expect(JSON.parse(lane.body)).toMatchObject({ data: { head: null } });
    }
  });

  it('writes each header of an answer with errors once (a client sending no Accept-Encoding reads its raw headers)', async () => {
    const body = (id: string) => JSON.stringify({ query: hotQuery, variables: { id } });
    await g.warm({ query: hotQuery, variables: { id: ids[43]! } });
    const before = await g.early();
    const raw = await new Promise<string[]>((resolve, reject) => {
      const request = httpRequest(g.endpoint, { method: 'POST', headers: { 'content-type': 'application/json' } }, (response) => {
        response.resume();
        response.on('end', () => resolve(response.rawHeaders));
      });
      request.on('error', reject);
      request.end(body('00000000-0000-4000-8000-000000000000'));
    });
    expect(await g.early()).toBe(before + 1);
    const names = raw.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
    expect(names.filter((name) => name === 'content-type')).toEqual(['content-type']);
    expect(new Set(names).size).toBe(names.length);
  });

  it('leaves to the pipeline what it must decide: variables that do not coerce, a mutation, a document that fails validation, one run once', async () => {
    await g.warm({ query: hotQuery, variables: { id: ids[41]! } });
    const before = await g.early();
    const notAnId = await g.shown({ query: hotQuery, variables: { id: { not: "an id" } } });
    expect(notAnId.status).toBe(200);
    expect(JSON.parse(notAnId.body).errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(notAnId.calls).toEqual([]);
    expect(await g.early()).toBe(before);
    const invalid = { query: '{ head(id: "x") { nope } }' };
    for (let i = 0; i < 3; i++) expect(JSON.parse((await g.shown(invalid)).body).errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
    expect(await g.early()).toBe(before);
    const once = await g.shown({ query: `{ head(id: "${ids[42]!}") { name } }` });
    expect(once.status).toBe(200);
    expect(await g.early()).toBe(before);
    const login = { query: 'mutation ($input: LoginInput!) { login(input: $input) { accessToken } }', variables: { input: DEMO_CREDENTIALS } };
    for (let i = 0; i < 3; i++) expect(JSON.parse((await g.shown(login)).body).data.login.accessToken).toEqual(expect.any(String));
    expect(await g.early()).toBe(before);
  });

  it('counts every operation it answers as the pipeline does, and gives back its unit in flight', async () => {
    const body = { query: hotQuery, variables: { id: ids[43]! } };
    await g.warm(body);
    const operations = () => g.counted('gateway_operation_duration_seconds_count{operation="LaneHot",type="query",outcome="ok"}');
    const [before, early] = [await operations(), await g.early()];
    for (let i = 0; i < 3; i++) expect((await g.shown(body)).status).toBe(200);
    expect(await operations()).toBe(before + 3);
    expect(await g.early()).toBe(early + 3);
    expect(await g.counted('gateway_operations_in_flight')).toBe(0);
  });

  it('a client that hangs up cancels the upstream call and gets no answer; its unit in flight comes back', async () => {
    const body = { query: hotQuery, variables: { id: ids[44]! } };
    await g.warm(body);
    const [early, abandoned] = [await g.early(), await g.counted('gateway_abandoned_answers_total')];
    g.t.reset();
    for (const operation of ['getHeadById', 'getHeadExtById', 'getHeadExt'] as const) g.t.reference.injectFault(operation, { kind: 'latency', ms: 60_000 });
    const hangUp = new AbortController();
    const aborted = fetch(g.endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: hangUp.signal }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(g.t.calls().length).toBe(1));
    expect(await g.counted('gateway_operations_in_flight')).toBe(1);
    hangUp.abort();
    expect(await aborted).toBeInstanceOf(Error);
    await vi.waitFor(async () => expect(await g.counted('gateway_abandoned_answers_total')).toBe(abandoned + 1));
    expect(await g.counted('gateway_operations_in_flight')).toBe(0);
    expect(await g.early()).toBe(early);
    g.t.reset();
  });
});

describe("the lane's hot queries, with limits and faults", () => {
  it('a plan over the budget is refused in the lane as in the pipeline, with no upstream call', async () => {
    const g = await laneGateway({ UPSTREAM_CALL_BUDGET: '1' });
    try {
      const ids = g.t.reference.store.headIds();
      const query = 'query Two($a: ID!, $b: ID!) { a: head(id: $a) { name } b: head(id: $b) { name } }';
      // The same id twice is one read, within the budget: run and compiled.
      await g.warm({ query, variables: { a: ids[0]!, b: ids[0]! } });
      const refused = [await g.counted('gateway_refusals_total{limit="budget"}'), await g.early()];
      const body = { query, variables: { a: ids[0]!, b: ids[1]! } };
      const pipeline = await g.shown(body, {}, 'pipeline');
      const lane = await g.shown(body);
      expect(lane).toEqual(pipeline);
      expect(lane.calls).toEqual([]);
      expect(JSON.parse(lane.body).errors[0].extensions).toMatchObject({ code: 'UPSTREAM_BUDGET_EXCEEDED', budget: 1 });
      expect([await g.counted('gateway_refusals_total{limit="budget"}'), await g.early()]).toEqual([refused[0]! + 2, refused[1]! + 1]);
    } finally {
      await g.t.close();
    }
  });

  it('an answer over MAX_RESPONSE_BYTES is replaced in the lane as in the pipeline', async () => {
    const g = await laneGateway({ MAX_RESPONSE_BYTES: '1024' });
    try {
      const query = 'query Page($first: Int!) { heads(first: $first) { nodes { id name url } } }';
      await g.warm({ query, variables: { first: 1 } });
      const body = { query, variables: { first: 40 } };
      const before = await g.counted('gateway_refusals_total{limit="response_bytes"}');
      const pipeline = await g.shown(body, {}, 'pipeline');
      const lane = await g.shown(body);
      expect(lane).toEqual(pipeline);
      expect(JSON.parse(lane.body).errors[0].extensions).toMatchObject({ code: 'RESULT_TOO_LARGE', limit: 'response_bytes' });
      expect(await g.counted('gateway_refusals_total{limit="response_bytes"}')).toBe(before + 2);
    } finally {
      await g.t.close();
    }
  });

  it('an upstream fault is masked, logged and answered in the lane as in the pipeline', async () => {
    const g = await laneGateway();
    try {
      const id = g.t.reference.store.headIds()[0]!;
      const body = { query: hotQuery, variables: { id } };
      await g.warm(body);
      for (const accept of ['application/json', 'application/graphql-response+json']) {
        const answers = [];
        for (const via of ['pipeline', 'lane'] as const) {
          const logged = g.t.logLines.length;
          g.t.reset();
          for (const operation of ['getHeadById', 'getHeadExtById', 'getHeadExt'] as const) g.t.reference.injectFault(operation, { kind: 'malformed-json' });
          const response = await g.send(via === 'lane' ? g.endpoint : `${g.endpoint}?via=pipeline`, body, { accept });
          answers.push({ status: response.status, body: await response.text(), calls: g.t.calls().length, logs: g.t.logLines.slice(logged).map((line) => JSON.parse(line) as { level: number; msg: string }).filter((line) => line.level >= 30).map((line) => line.msg) });
        }
        expect(answers[1]).toEqual(answers[0]);
        expect(JSON.parse(answers[1]!.body).errors[0].extensions.code).toBe('UPSTREAM_ERROR');
        expect(answers[1]!.body).not.toContain(g.t.reference.url);
      }
      g.t.reset();
    } finally {
      await g.t.close();
    }
  });

  it('charges what it runs to the caller as the pipeline does: one holding the cap is refused at the door, a newcomer is answered by the lane', async () => {
    // Each caller from an address of its own (TRUST_PROXY); the cap of 2 held by one caller's hot queries.
    const g = await laneGateway({ SHED_MAX_IN_FLIGHT: '2', SHED_EVENT_LOOP_DELAY_MS: '0', UPSTREAM_DEDUPE: 'false', TRUST_PROXY: 'true' });
    try {
      const ids = g.t.reference.store.headIds();
      const body = (id: string) => ({ query: hotQuery, variables: { id } });
      await g.warm(body(ids[0]!));
      const before = await g.early();
      g.t.reset();
      for (const operation of ['getHeadById', 'getHeadExtById', 'getHeadExt'] as const) g.t.reference.injectFault(operation, { kind: 'latency', ms: 60_000 }, 2);
      const heavy = { 'x-forwarded-for': '198.51.100.80', authorization: 'Bearer lane-heavy' };
      const held = [g.send(g.endpoint, body(ids[1]!), heavy), g.send(g.endpoint, body(ids[2]!), heavy)];
      await until(() => g.t.reference.inFlight() === 2, "the heavy caller's two hot queries held at the upstream");
      expect(await g.counted('gateway_operations_in_flight')).toBe(2);
      expect((await g.send(g.endpoint, body(ids[3]!), heavy)).status).toBe(503);
      const newcomer = await g.send(g.endpoint, body(ids[4]!), { 'x-forwarded-for': '198.51.100.81', authorization: 'Bearer lane-newcomer' });
      expect(newcomer.status).toBe(200);
      expect(await g.early()).toBe(before + 1);
      g.t.reference.releaseHeld();
      expect((await Promise.all(held)).map((response) => response.status)).toEqual([200, 200]);
      expect(await g.early()).toBe(before + 3);
      expect(await g.counted('gateway_overload_refusals_total{reason="caller_share"}')).toBe(1);
    } finally {
      await g.t.close();
    }
  });

  it('is off with compiled execution off: every query goes through yoga', async () => {
    const g = await laneGateway({ COMPILED_EXECUTION: 'off' });
    try {
      const body = { query: hotQuery, variables: { id: g.t.reference.store.headIds()[0]! } };
      for (let i = 0; i < 4; i++) expect((await g.shown(body)).status).toBe(200);
      expect(await g.early()).toBe(0);
      expect(await g.counted('gateway_compiled_executions_total')).toBe(0);
    } finally {
      await g.t.close();
    }
  });
});
