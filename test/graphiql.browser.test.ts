import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parse, print } from 'graphql';
import type { Browser, BrowserContext, Page, Response } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { DEMO_CREDENTIALS } from '../src/reference-upstream/seed.js';
import { type ReferenceUpstream, startReferenceUpstream } from '../src/reference-upstream/server.js';
import { buildGateway } from '../src/server/gateway.js';
import { createGatewayServer } from '../src/server/http/http-server.js';
import { createLogger } from '../src/server/instruments/logger.js';
import { GatewayMetrics } from '../src/server/instruments/metrics.js';
import { defaultGraphiQLQuery } from '../src/server/pages/graphiql-page.js';
import type { Upstream } from '../src/upstream/upstream.js';
import { launchChromium, type NetworkLog, watchPage } from './support/browser.js';
import { describeWithChromium } from './support/services.js';

/*
 * GraphiQL as a person meets it: Debian's Chromium opens the gateway's /graphql page, runs the
 * default query against the embedded reference upstream, then a bearer-token query through the
 * Headers pane. The page must work offline: every request stays on the gateway's origin.
 */

const ARTIFACTS = fileURLToPath(new URL('./.artifacts/', import.meta.url));
const SCREENSHOT = `${ARTIFACTS}graphiql.png`;
const PERMISSIONS_QUERY = '{ permissions(first: 2) { totalCount } }';
/** Does not parse: GraphiQL finds that in the browser and sends nothing. */
const SYNTAX_ERROR = 'query Broken { heads(first: 1) { totalCount } } !!';
/** Parses and validates; the gateway refuses the id (BAD_USER_INPUT) before any upstream call. */
const BAD_INPUT = 'query BadId { head(id: "not-an-id") { name } }';

/** Monaco renders spaces as U+00A0; this gives back the plain text of an editor's visible lines. */
async function editorText(page: Page, uriSuffix: string): Promise<string> {
  // Monaco's lines are blocks: innerText keeps the line breaks between them.
  // biome-ignore lint/performance/useDomNodeTextContent: the breaks are wanted
  const text = await page.locator(`.monaco-editor[data-uri$="${uriSuffix}"] .view-lines`).innerText();
  return text.replace(/\u00a0/g, ' ');
}

/**
 * How long the page may take to show what a step waits for. Only a page that is stuck should fail
 * a test, not a busy machine: this is a limit for giving up, well inside the test's own timeout.
 */
const UI_WAIT_MS = 15_000;

/** Polls an editor until its text passes `check`; returns the last text seen (for the assertion message). */
async function waitForEditorText(
  page: Page,
  uriSuffix: string,
  check: (text: string) => boolean,
  timeoutMs = UI_WAIT_MS,
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let text = '';
  for (;;) {
    text = await editorText(page, uriSuffix);
    if (check(text) || Date.now() > deadline) return text;
    await page.waitForTimeout(50);
  }
}

/** Replaces the whole content of a Monaco editor, without the auto-closing of typed brackets. */
async function replaceEditorContent(page: Page, uriSuffix: string, content: string): Promise<void> {
  await page.locator(`.monaco-editor[data-uri$="${uriSuffix}"] .view-lines`).click();
  await page.keyboard.press('ControlOrMeta+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(content);
}

/** Clicks GraphiQL's run button and returns the gateway's answer to the POST it sends. */
async function execute(page: Page, graphqlUrl: string, marker: string): Promise<Response> {
  const answered = page.waitForResponse(
    (r) => r.url() === graphqlUrl && r.request().method() === 'POST' && (r.request().postData() ?? '').includes(marker),
    { timeout: UI_WAIT_MS },
  );
  await page.locator('.graphiql-execute-button').click();
  return answered;
}

async function json<T>(response: globalThis.Response): Promise<T> {
  if (!response.ok) throw new Error(`${response.url}: HTTP ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

// One person's session, step by step on one page (open, run the default query, type a token and
// run another, then check where the page went): the steps keep their order under --sequence.shuffle.
describeWithChromium('GraphiQL in Chromium', { shuffle: false }, () => {
  let reference: ReferenceUpstream;
  let upstream: Upstream;
  let server: Server | undefined;
  let browser: Browser | undefined;
  let context: BrowserContext;
  let page: Page;
  let network: NetworkLog;
  let origin: string;
  let graphqlUrl: string;
  const blocked: string[] = [];

  // What the upstream itself says, read through its own REST API before the browser starts.
  let firstHeads: { name: string; id: string }[];
  let headTotal: number;
  let token: string;
  let permissionTotal: number;

  beforeAll(async () => {
    reference = await startReferenceUpstream({ host: '127.0.0.1', port: 0 });
    const listing = await json<{ items: { name: string; id: string }[]; total: number }>(
      await fetch(`${reference.url}/heads?page=1&size=3`),
    );
    firstHeads = listing.items;
    headTotal = listing.total;
    const login = await json<{ access_token: string; token_type: string }>(
      await fetch(`${reference.url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          username: DEMO_CREDENTIALS.username,
          password: DEMO_CREDENTIALS.password,
          grant_type: 'password',
        }),
      }),
    );
    token = login.access_token;
    const permissions = await json<{ total: number }>(
      await fetch(`${reference.url}/permissions?page=1&size=1`, { headers: { authorization: `Bearer ${token}` } }),
    );
    permissionTotal = permissions.total;
    reference.resetRecording();

    // As in main.ts, with the defaults of an empty environment (whatever the CI shell exports).
    const config = loadConfig({});
    const metrics = new GatewayMetrics({ defaultMetrics: false });
    const built = buildGateway(config, reference.url, { logger: createLogger({ level: 'silent' }), metrics });
    upstream = built.upstream;
    const srv = createGatewayServer(built.handler, config, metrics);
    server = srv;
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    const { port } = srv.address() as AddressInfo;
    origin = `http://127.0.0.1:${port}`;
    graphqlUrl = `${origin}/graphql`;

    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    // Nothing leaves the machine: a request to any other origin is recorded, then aborted.
    await context.route(
      (url) => url.origin !== origin,
      (route) => {
        blocked.push(route.request().url());
        return route.abort('blockedbyclient');
      },
    );
    page = await context.newPage();
    network = watchPage(page, origin);
  });

  afterAll(async () => {
    await browser?.close();
    if (server !== undefined) {
      const srv = server;
      const closed = new Promise((resolve) => srv.close(resolve));
      srv.closeAllConnections();
      await closed;
    }
    await upstream?.close();
    await reference?.close();
  });

  it(
    'serves GraphiQL to a browser navigation, with the default query in the editor',
    async () => {
      const response = await page.goto(graphqlUrl, { waitUntil: 'load' });
      expect(response?.status()).toBe(200);
      expect(response?.headers()['content-type']).toMatch(/^text\/html/);
      // Chromium asks for brotli; the page comes compressed, with a validator for its next visit.
      expect(response?.headers()['content-encoding']).toBe('br');
      expect(response?.headers().etag).toMatch(/^W\//);
      // A normal navigation asks for HTML; that is what makes the gateway answer with GraphiQL (pages/front-door.ts).
      expect((await response!.request().allHeaders()).accept).toContain('text/html');
      expect(await page.title()).toBe('Avatar Head gateway');

      await page
        .locator('section.graphiql-query-editor .monaco-editor')
        .waitFor({ state: 'visible', timeout: UI_WAIT_MS });
      await expect(page.locator('.graphiql-execute-button').getAttribute('aria-label')).resolves.toMatch(
        /^Execute query/,
      );
      const query = await waitForEditorText(
        page,
        '-operation.graphql',
        (t) => t.includes('HeadsWithHair') && t.includes('hair {'),
      );
      expect(query).toContain('query HeadsWithHair {');
      expect(query).toContain('hair {');
      // Its comment says what it asks for.
      expect(query).toContain('# The first three heads with their hair, and how many heads there are:');
      expect(query).toContain('heads(first: 3) {');

      // The Headers pane is there (and open by default: defaultEditorToolsVisibility 'headers').
      await expect(page.getByRole('button', { name: 'Headers', exact: true }).isVisible()).resolves.toBe(true);
      await expect(page.locator('.monaco-editor[data-uri$="-request-headers.json"]').isVisible()).resolves.toBe(true);
      // Loading the page (schema introspection included) does not touch the upstream.
      expect(reference.requests).toEqual([]);
    },
    3 * UI_WAIT_MS,
  );

  it(
    'runs the default query and shows the upstream data in the result pane',
    async () => {
      reference.resetRecording();
      const response = await execute(page, graphqlUrl, 'HeadsWithHair');
      const sent = response.request().postDataJSON() as { query: string; operationName?: string };
      // GraphiQL sends the operation with comments and spacing stripped.
      expect(print(parse(sent.query))).toBe(print(parse(defaultGraphiQLQuery)));

      const body = (await response.json()) as {
        data?: { heads: { totalCount: number; nodes: { id: string; name: string; hair: unknown }[] } };
        errors?: unknown;
      };
      expect(body.errors).toBeUndefined();
      expect(body.data?.heads.totalCount).toBe(headTotal);
      expect(body.data?.heads.nodes.map((n) => n.name)).toEqual(firstHeads.map((h) => h.name));

      const firstName = firstHeads[0]!.name;
      const result = await waitForEditorText(page, '-response.json', (t) => t.includes(firstName));
      expect(result).toContain(`"name": "${firstName}"`);
      expect(result).toContain(`"totalCount": ${headTotal}`);
      expect(result).not.toContain('"errors"');

      // One listing call: the first page, large enough for the three heads (hair comes inline).
      const calls = reference.requests.map((r) => ({
        operation: r.operation,
        method: r.method,
        path: r.path,
        page: r.query.page,
        status: r.status,
      }));
      expect(calls).toEqual([{ operation: 'listHeads', method: 'GET', path: '/v2/heads', page: '1', status: 200 }]);
      const size = Number(reference.requests[0]!.query.size);
      expect(size).toBeGreaterThanOrEqual(3);
      expect(size).toBeLessThanOrEqual(100);

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: SCREENSHOT });
    },
    3 * UI_WAIT_MS,
  );

  it(
    'sends the Authorization header typed into the Headers pane to the upstream',
    async () => {
      await page.getByRole('button', { name: 'Headers', exact: true }).click();
      await replaceEditorContent(page, '-request-headers.json', JSON.stringify({ Authorization: `Bearer ${token}` }));
      await replaceEditorContent(page, '-operation.graphql', PERMISSIONS_QUERY);
      expect(await waitForEditorText(page, '-operation.graphql', (t) => t.trim() === PERMISSIONS_QUERY)).toBe(
        PERMISSIONS_QUERY,
      );

      // GraphiQL copies the editors into its state after a short debounce; the tab title follows the
      // operation name, so it leaving "HeadsWithHair" shows the new query is the one the button runs.
      await page
        .locator('.graphiql-tab-active .graphiql-tab-button')
        .filter({ hasNotText: 'HeadsWithHair' })
        .waitFor({ timeout: UI_WAIT_MS });

      reference.resetRecording();
      const response = await execute(page, graphqlUrl, 'permissions');
      expect((await response.request().allHeaders()).authorization).toBe(`Bearer ${token}`);
      expect(print(parse((response.request().postDataJSON() as { query: string }).query))).toBe(
        print(parse(PERMISSIONS_QUERY)),
      );
      const body = (await response.json()) as { data?: { permissions: { totalCount: number } }; errors?: unknown };
      expect(body).toEqual({ data: { permissions: { totalCount: permissionTotal } } });

      const result = await waitForEditorText(page, '-response.json', (t) => t.includes('"permissions"'));
      expect(result).toContain(`"totalCount": ${permissionTotal}`);
      expect(result).not.toContain('"errors"');

      const calls = reference.requests.map((r) => ({
        operation: r.operation,
        authorization: r.headers.authorization,
        status: r.status,
      }));
      expect(calls).toEqual([{ operation: 'getPermissions', authorization: `Bearer ${token}`, status: 200 }]);
      expect(reference.requests[0]!.query).toMatchObject({ page: '1' });

      await page.screenshot({ path: `${ARTIFACTS}graphiql-permissions.png` });
    },
    3 * UI_WAIT_MS,
  );

  it(
    'shows a syntax error (found in the browser) with its message and no stack, and an error of the gateway with its code',
    async () => {
      await replaceEditorContent(page, '-operation.graphql', SYNTAX_ERROR);
      expect(await waitForEditorText(page, '-operation.graphql', (t) => t.trim() === SYNTAX_ERROR)).toBe(SYNTAX_ERROR);
      // Typing may leave the suggestions open over the run button.
      await page.keyboard.press('Escape');
      await page
        .locator('.graphiql-tab-active .graphiql-tab-button')
        .filter({ hasText: 'Broken' })
        .waitFor({ timeout: UI_WAIT_MS });
      reference.resetRecording();
      await page.locator('.graphiql-execute-button').click();
      const shown = await waitForEditorText(page, '-response.json', (t) => t.includes('Syntax Error'));
      expect(shown).toContain('"message": "Syntax Error: Unexpected \\"!\\"."');
      expect(shown).not.toContain('stack');
      expect(shown).not.toMatch(/\bat .*:\d+:\d+/);

      await replaceEditorContent(page, '-operation.graphql', BAD_INPUT);
      await page.keyboard.press('Escape');
      await page
        .locator('.graphiql-tab-active .graphiql-tab-button')
        .filter({ hasText: 'BadId' })
        .waitFor({ timeout: UI_WAIT_MS });
      const response = await execute(page, graphqlUrl, 'BadId');
      expect(response.status()).toBe(200);
      const result = await waitForEditorText(page, '-response.json', (t) => t.includes('BAD_USER_INPUT'));
      expect(result).toContain('"code": "BAD_USER_INPUT"');
      expect(result).not.toContain('stack');
      expect(reference.requests).toEqual([]);
    },
    3 * UI_WAIT_MS,
  );

  it(
    'opening / or /graphiql lands on GraphiQL',
    async () => {
      for (const path of ['/', '/graphiql']) {
        const response = await page.goto(`${origin}${path}`, { waitUntil: 'load' });
        expect(response?.request().redirectedFrom()?.url(), path).toBe(`${origin}${path}`);
        expect(response?.request().url(), path).toBe(graphqlUrl);
        expect(await page.title()).toBe('Avatar Head gateway');
        await page
          .locator('section.graphiql-query-editor .monaco-editor')
          .waitFor({ state: 'visible', timeout: UI_WAIT_MS });
        expect(new URL(page.url()).pathname).toBe('/graphql');
      }
    },
    3 * UI_WAIT_MS,
  );

  it('stayed on the gateway origin: no outside host, no CDN, no failed request, no page error', () => {
    const httpRequests = network.requests.filter((r) => r.url.startsWith('http'));
    expect(httpRequests.length).toBeGreaterThanOrEqual(3); // the page, introspection, two executions
    expect(network.outsideRequests()).toEqual([]);
    expect(blocked).toEqual([]);
    expect(network.failed).toEqual([]);
    expect(network.errorResponses).toEqual([]);
    expect(network.pageErrors).toEqual([]);
    expect(network.consoleErrors).toEqual([]);
  });
});
