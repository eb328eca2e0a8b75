import { UpstreamError } from '../../upstream/errors.js';
import { listHeads } from '../../upstream/heads.js';
import type { Upstream } from '../../upstream/upstream.js';

export interface ReadinessOptions {
  /** A check that throws counts as "not ready". */
  readonly check: () => Promise<boolean>;
  /** So probes and scrapes never hammer the upstream. @default ANSWER_KEPT_MS */
  readonly cacheMs?: number;
  /** Tests pass a fake clock. @default Date.now */
  readonly now?: () => number;
}

/** How long `/ready` reuses an answer: a probe every second costs the upstream one call in five. */
const ANSWER_KEPT_MS = 5_000;

/** The readiness check, and its last answer without asking again (undefined: never asked): what a scrape reads. */
export type Readiness = (() => Promise<boolean>) & { readonly last: () => boolean | undefined };

/** The upstream sees one check per `cacheMs` at most (from when it finished): callers share one in flight. */
export function createReadiness(options: ReadinessOptions): Readiness {
  const { check, cacheMs = ANSWER_KEPT_MS, now = Date.now } = options;
  let cached: { readonly ready: boolean; readonly at: number } | undefined;
  let pending: Promise<boolean> | undefined;
  const run = async (): Promise<boolean> => {
    let ready: boolean;
    try {
      ready = (await check()) === true;
    } catch {
      ready = false;
    }
    cached = { ready, at: now() };
    pending = undefined;
    return ready;
  };
  const ready = () => {
    if (cached !== undefined && now() - cached.at < cacheMs) return Promise.resolve(cached.ready);
    pending ??= run();
    return pending;
  };
  return Object.assign(ready, { last: () => cached?.ready });
}

/** Longest wait for the probe's answer, long before a call's own timeout: /ready answers within a second. */
const PROBE_TIMEOUT_MS = 800;

/** Any HTTP status is an answer, 5xx too (its breaker contains it); no token: a probe holds no credentials. */
export function upstreamAnswers(upstream: Upstream, { timeoutMs = PROBE_TIMEOUT_MS } = {}): () => Promise<boolean> {
  return () => {
    const signal = AbortSignal.timeout(timeoutMs);
    const answered = listHeads(upstream.forProbe({ requestId: 'readiness', signal }), { page: 1, size: 1 }).then(
      () => true,
      (error: unknown) => error instanceof UpstreamError && error.status !== undefined,
    );
    // The signal cancels the call once on the wire; before (a connection being made), only this ends the wait.
    const late = new Promise<boolean>((resolve) =>
      signal.addEventListener('abort', () => resolve(false), { once: true }),
    );
    return Promise.race([answered, late]);
  };
}
