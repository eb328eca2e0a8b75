import { encodeGlobalID } from '@pothos/plugin-relay';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { launchChromium } from './support/browser.js';
import { startTestGateway, type TestGateway } from './support/gateway.js';
import { describeWithChromium } from './support/services.js';
import { until } from './support/until.js';

/*
 * GraphiQL runs a subscription against the gateway (over SSE, its default): Chromium opens the
 * page, runs `headChanged`, and shows the event a write through the gateway causes.
 */

const UI_WAIT_MS = 15_000;

async function editorText(page: Page, uriSuffix: string): Promise<string> {
  // Monaco's lines are blocks: innerText keeps the line breaks between them.
  // biome-ignore lint/performance/useDomNodeTextContent: the breaks are wanted
  return (await page.locator(`.monaco-editor[data-uri$="${uriSuffix}"] .view-lines`).innerText()).replace(
    /\u00a0/g,
    ' ',
  );
}

describeWithChromium('GraphiQL runs a subscription', () => {
  let t: TestGateway;
  let browser: Browser | undefined;
  let page: Page;
  let graphqlUrl: string;
  beforeAll(async () => {
    t = await startTestGateway();
    graphqlUrl = await t.listen();
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it(
    'shows the event of a change made while it listens',
    async () => {
      const id = t.reference.store.headIds()[60]!;
      const subscription = `subscription Watch { headChanged(id: "${id}") { head { name } } }`;
      expect((await page.goto(graphqlUrl, { waitUntil: 'load' }))?.status()).toBe(200);
      const editor = page.locator('.monaco-editor[data-uri$="-operation.graphql"] .view-lines');
      await editor.waitFor({ state: 'visible', timeout: UI_WAIT_MS });
      await editor.click();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.press('Delete');
      await page.keyboard.insertText(subscription);
      await page.keyboard.press('Escape');
      await page
        .locator('.graphiql-tab-active .graphiql-tab-button')
        .filter({ hasText: 'Watch' })
        .waitFor({ timeout: UI_WAIT_MS });
      await page.locator('.graphiql-execute-button').click();
      await until(() => t.subscriptions.open() === 1, 'the subscription open', UI_WAIT_MS);
      expect(
        (
          await t.execute('mutation($input: UpdateHeadInput!) { updateHead(input: $input) { head { id } } }', {
            input: { id: encodeGlobalID('Head', id), name: 'Seen in GraphiQL' },
          })
        ).errors,
      ).toBeUndefined();
      let shown = '';
      await until(
        async () => {
          shown = await editorText(page, '-response.json');
          return shown.includes('Seen in GraphiQL');
        },
        'the event in the result pane',
        UI_WAIT_MS,
      );
      expect(shown).toContain('"headChanged"');
      // Stopping it in GraphiQL closes it at the gateway.
      await page.locator('.graphiql-execute-button').click();
      await until(() => t.subscriptions.open() === 0, 'closed from GraphiQL', UI_WAIT_MS);
    },
    4 * UI_WAIT_MS,
  );
});
