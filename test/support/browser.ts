import { type Browser, chromium, type Page, type Request } from 'playwright-core';
import { requireProgram } from './services.js';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Launches Debian's Chromium (the `chromium` package: `npx playwright install` cannot download
 * here, ../shared/STACK-NOTES.md) headless; playwright gives every launch a fresh temporary profile.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: requireProgram('chromium'),
    args: CHROMIUM_ARGS,
    headless: true,
    timeout: 15_000,
  });
}

export interface NetworkLog {
  /** Every request the page (and its workers) made, in order: `METHOD url`. */
  readonly requests: { method: string; url: string }[];
  /** Requests that failed, with Chromium's error text. */
  readonly failed: { url: string; error: string }[];
  /** HTTP responses with a status >= 400. */
  readonly errorResponses: { url: string; status: number }[];
  /** console.error messages and uncaught page errors. */
  readonly consoleErrors: string[];
  readonly pageErrors: string[];
  /** Requests to anything but `allowedOrigin`; `blob:` and `data:` URLs stay in the page. */
  outsideRequests(): string[];
}

/** Records a page's traffic and errors. */
export function watchPage(page: Page, allowedOrigin: string): NetworkLog {
  const log: NetworkLog = {
    requests: [],
    failed: [],
    errorResponses: [],
    consoleErrors: [],
    pageErrors: [],
    outsideRequests() {
      return this.requests
        .map((r) => r.url)
        .filter((url) => {
          if (url.startsWith('data:')) return false;
          // blob:http://127.0.0.1:PORT/uuid: an in-memory object of that origin (GraphiQL's Monaco workers).
          const effective = url.startsWith('blob:') ? url.slice('blob:'.length) : url;
          try {
            return new URL(effective).origin !== allowedOrigin;
          } catch {
            return true;
          }
        });
    },
  };
  const onRequest = (request: Request) => log.requests.push({ method: request.method(), url: request.url() });
  page.on('request', onRequest);
  page.on('requestfailed', (request) =>
    log.failed.push({ url: request.url(), error: request.failure()?.errorText ?? 'unknown' }),
  );
  page.on('response', (response) => {
    if (response.status() >= 400) log.errorResponses.push({ url: response.url(), status: response.status() });
  });
  page.on('console', (message) => {
    if (message.type() === 'error') log.consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => log.pageErrors.push(error.message));
  page.on('worker', (worker) => log.requests.push({ method: 'WORKER', url: worker.url() }));
  return log;
}
