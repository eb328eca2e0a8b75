import { UpstreamError } from '../../upstream/errors.js';
import { listHeads } from '../../upstream/heads.js';
import type { Upstream } from '../../upstream/upstream.js';

export interface ReadinessOptions {
  /** Whether the service can take traffic now. A check that throws counts as "not ready". */
  readonly check: () => Promise<boolean>;
  /** How long one answer is reused, so probes and scrapes never hammer the upstream. @default ANSWER_KEPT_MS */
  readonly cacheMs?: number;
  /** The clock, in milliseconds; tests pass a fake one. @default Date.now */
  readonly now?: () => number;
}

/** How long `/ready` reuses an answer: a probe every second costs the upstream one call in five. */
const ANSWER_KEPT_MS = 5_000;

/**
 * Wraps a readiness check for `/ready`: its answer is cached for `cacheMs` (counted from when the
 * check finished) and concurrent callers share one check in flight, so however many probes
 * arrive at once, the upstream sees at most one call per `cacheMs`.
 */
export function createReadiness(options: ReadinessOptions): () => Promise<boolean> {
  const { check } = options;
  const cacheMs = options.cacheMs ?? ANSWER_KEPT_MS;
  const now = options.now ?? Date.now;
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

  return () => {
    if (cached !== undefined && now() - cached.at < cacheMs) return Promise.resolve(cached.ready);
    pending ??= run();
    return pending;
  };
}

/** Longest wait for the probe's answer: /ready answers within a second, whatever the upstream does. */
const PROBE_TIMEOUT_MS = 800;

export interface UpstreamAnswersOptions {
  /**
   * Longest wait for the upstream's answer; probes give up long before a call's own timeout. @default PROBE_TIMEOUT_MS
   */
  readonly timeoutMs?: number;
}

/**
 * "Does the upstream answer HTTP?": asks Get Heads for one item, without a token, on the
 * upstream's probe connection (never queued behind operations). Any HTTP answer counts, 401, 422
 * and 5xx included (the host is there and speaking the protocol; a readiness probe has no
 * business holding credentials; a 5xx is one operation failing, which its own breaker contains,
 * not a reason to take the replica out of rotation). Not ready: no connection
 * (UPSTREAM_UNAVAILABLE), no answer in time (UPSTREAM_TIMEOUT, or the probe's own timeout), or a
 * failure without any status.
 */
export function upstreamAnswers(upstream: Upstream, options: UpstreamAnswersOptions = {}): () => Promise<boolean> {
  const timeoutMs = options.timeoutMs ?? PROBE_TIMEOUT_MS;
  return () => {
    const signal = AbortSignal.timeout(timeoutMs);
    const answered = listHeads(upstream.forProbe({ requestId: 'readiness', signal }), { page: 1, size: 1 }).then(
      () => true,
      (error: unknown) => error instanceof UpstreamError && error.status !== undefined,
    );
    // The signal cancels the call once it is on the wire; before (a connection still being made), only this ends the
    // wait.
    const late = new Promise<boolean>((resolve) =>
      signal.addEventListener('abort', () => resolve(false), { once: true }),
    );
    return Promise.race([answered, late]);
  };
}
